#!/usr/bin/env bash
# CI for the ARM builds and the packages. Runs on a fresh Debian machine as root
# (installs what it needs: cross gcc, qemu-user-static, shellcheck, rustup toolchains).
#
#   packaging/ci.sh
#
#  1. shellcheck on every shell script, the maintainer scripts, the procd and OpenRC init scripts
#  2. systemd-analyze verify on the unit (skipped with a message where there is none)
#  3. the OpenWrt init script's UCI -> flags mapping, against procd stubs
#  4. the Yocto crate list is up to date with Cargo.lock
#  5. release builds for aarch64, armv7, armv6: static, stripped, right CPU, size budget
#  6. unit tests of the aarch64 and armv7 builds under qemu-user
#  7. .deb for arm64 and armhf, file lists checked with dpkg-deb -c
#  8. .ipk for aarch64 and armv7 (and armv6), inspected with tar
# Environment: as build-all.sh (CARGO_TARGET_DIR, PICOLET_DIST, toolchain and budget
# overrides); PICOLET_CI_SKIP_TESTS=1 skips step 6.
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$PICOLET_ROOT"

passed=0 failed=0 timings=()
ci_start=$(date +%s)

# step <name> <command...>: run, time, count.
step() {
	local name=$1 start rc
	shift
	log "[$name]"
	start=$(date +%s)
	set +e
	(set -e; "$@")
	rc=$?
	set -e
	timings+=("$(printf '%-24s %5ds  %s' "$name" "$(($(date +%s) - start))" "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
	# Under tests/ci.sh, its table shows this step too.
	if [ -n "${PICOLET_CI_TIMINGS:-}" ]; then
		printf '  %-50s %6ds  %s\n' "$name" "$(($(date +%s) - start))" \
			"$([ $rc -eq 0 ] && echo ok || echo FAILED)" >>"$PICOLET_CI_TIMINGS"
	fi
	if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# expect_lines <what> <listing> <required entries...>: each entry must be a line of listing.
expect_lines() {
	local what=$1 listing=$2 e bad=0
	shift 2
	for e in "$@"; do
		if ! grep -qxF -- "$e" <<<"$listing"; then
			echo "$what: missing $e" >&2
			bad=1
		fi
	done
	return $bad
}

lint() {
	apt_ensure shellcheck
	local scripts=(
		packaging/*.sh packaging/deb/mkdeb.sh packaging/deb/postinst packaging/deb/prerm
		packaging/deb/postrm packaging/yocto/gen-crates.sh packaging/openwrt/test-init.sh
		packaging/openwrt/ipk/postinst packaging/openwrt/ipk/prerm
		packaging/openwrt/files/picolet.init packaging/openrc/picolet
	)
	shellcheck -x "${scripts[@]}"
	echo "shellcheck: ${#scripts[@]} scripts clean"
}

verify_unit() {
	if ! command -v systemd-analyze >/dev/null 2>&1; then
		echo "systemd-analyze not available: unit not verified (skipped)"
		return 0
	fi
	local tmp out
	tmp=$(mktemp -d)
	# verify insists that ExecStart exists and is executable: point it at a stand-in.
	printf '#!/bin/sh\n' >"$tmp/picolet" && chmod +x "$tmp/picolet"
	local u
	for u in picolet.service picolet-node-shutdown.service; do
		sed "s|/usr/bin/picolet|$tmp/picolet|" "packaging/systemd/$u" >"$tmp/$u"
	done
	out=$(cd "$tmp" && systemd-analyze verify picolet.service picolet-node-shutdown.service 2>&1) ||
		{ echo "$out"; rm -rf "$tmp"; return 1; }
	rm -rf "$tmp"
	# Warnings (unknown keys, bad values) do not change the exit code: fail on any output.
	if [ -n "$out" ]; then echo "$out"; return 1; fi
	echo "systemd-analyze verify: picolet.service and picolet-node-shutdown.service clean"
}

debs() {
	local spec arch target deb list
	for spec in arm64:aarch64-unknown-linux-musl armhf:arm-unknown-linux-musleabihf; do
		arch=${spec%%:*} target=${spec#*:}
		deb=$(packaging/deb/mkdeb.sh "$arch" "$PICOLET_DIST/picolet-$target")
		[ "$(basename "$deb")" = "picolet_$(picolet_version)_$arch.deb" ] || { echo "bad name $deb"; return 1; }
		echo "== $deb"
		list=$(dpkg-deb -c "$deb")
		echo "$list"
		expect_lines "$deb" "$(awk '{print $1, $2, $6}' <<<"$list")" \
			"-rwxr-xr-x root/root ./usr/bin/picolet" \
			"-rw-r--r-- root/root ./usr/lib/systemd/system/picolet.service" \
			"-rw-r--r-- root/root ./usr/lib/systemd/system/picolet-node-shutdown.service" \
			"-rw-r--r-- root/root ./etc/picolet/config.yaml" \
			"drwxr-xr-x root/root ./etc/kubernetes/manifests/" || return 1
		dpkg-deb -f "$deb" Package Version Architecture
		[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || return 1
		expect_lines "$deb conffiles" "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles)" \
			/etc/picolet/config.yaml || return 1
		# The packaged binary is the one that was built and checked.
		cmp <(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/bin/picolet) \
			"$PICOLET_DIST/picolet-$target" || return 1
	done
}

ipks() {
	local target ipk outer control data
	for target in aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf arm-unknown-linux-musleabihf; do
		ipk=$(packaging/mkipk.sh "$target" "$PICOLET_DIST/picolet-$target")
		echo "== $ipk"
		outer=$(tar -tzf "$ipk")
		[ "$outer" = "$(printf './debian-binary\n./control.tar.gz\n./data.tar.gz')" ] ||
			{ echo "outer members: $outer"; return 1; }
		[ "$(tar -xzOf "$ipk" ./debian-binary)" = 2.0 ] || return 1
		control=$(tar -xzOf "$ipk" ./control.tar.gz | tar -xzOf - ./control)
		echo "$control"
		expect_lines "$ipk control" "$control" "Package: picolet" \
			"Version: $(picolet_version)-1" || return 1
		grep -q '^Architecture: [a-z0-9]*_' <<<"$control" || { echo "no OpenWrt arch"; return 1; }
		expect_lines "$ipk control members" "$(tar -xzOf "$ipk" ./control.tar.gz | tar -tzf -)" \
			./control ./conffiles ./postinst ./prerm || return 1
		data=$(tar -xzOf "$ipk" ./data.tar.gz | tar -tvzf -)
		echo "$data"
		expect_lines "$ipk data" "$(awk '{print $1, $2, $6}' <<<"$data")" \
			"-rwxr-xr-x 0/0 ./usr/bin/picolet" \
			"-rwxr-xr-x 0/0 ./etc/init.d/picolet" \
			"-rw------- 0/0 ./etc/config/picolet" \
			"drwxr-xr-x 0/0 ./etc/kubernetes/manifests/" || return 1
		cmp <(tar -xzOf "$ipk" ./data.tar.gz | tar -xzOf - ./usr/bin/picolet) \
			"$PICOLET_DIST/picolet-$target" || return 1
	done
}

step shellcheck lint
step systemd-verify verify_unit
step openwrt-init packaging/openwrt/test-init.sh
step yocto-crates packaging/yocto/gen-crates.sh --check
# The full and static-only builds only: the per-feature size table (12 more fat-LTO builds,
# ~20 min) is `packaging/build-all.sh` run by hand (packaging/README.md); tests/ci.sh checks
# that every one of those feature sets compiles.
step build-all packaging/build-all.sh --no-table
if [ "$failed" -eq 0 ]; then
	if [ "${PICOLET_CI_SKIP_TESTS:-0}" != 1 ]; then
		step qemu-tests packaging/test-arm.sh --no-install
	fi
	step deb debs
	step ipk ipks
fi

printf '\n%-24s %6s  %s\n' step time status
for t in "${timings[@]}"; do echo "$t"; done
echo "total $(($(date +%s) - ci_start))s"
echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
