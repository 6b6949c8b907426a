#!/usr/bin/env bash
# Run picolet's unit tests (`cargo test --lib`) as ARM binaries under qemu-user.
#
#   packaging/test-arm.sh [--no-install] [--targets "T1 T2"] [-- <test filter / harness args>]
#
# Default targets: aarch64, armv7 and armv6 (on an emulated ARM1176, plus the HTTPS tests).
# The tests are cross-compiled as the release binaries are (packaging/lib.sh): the pinned
# nightly, std built from source with the same std features (optimize_for_size, no backtrace
# symbolizer) plus the unwinding the test harness needs, the target's rustflags (armv7 in
# Thumb-2, rust-lld with identical code folding). They run through the `runner` of
# .cargo/config.toml (qemu-aarch64-static / qemu-arm-static, named explicitly: binfmt_misc
# is not needed).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"

install=1
targets=(aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf arm-unknown-linux-musleabihf)
harness=()
while [ $# -gt 0 ]; do
	case "$1" in
	--no-install) install=0 ;;
	--targets) read -r -a targets <<<"$2"; shift ;;
	--) shift; harness=("$@"); break ;;
	-h | --help) sed -n '2,10p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done

if [ "$install" -eq 1 ]; then
	pkgs=(qemu-user-static)
	for t in "${targets[@]}"; do mapfile -t -O "${#pkgs[@]}" pkgs < <(cross_packages_for "$t"); done
	apt_ensure "${pkgs[@]}"
	for t in "${targets[@]}"; do toolchain_ensure "$t"; done
fi

rows=()
failed=0
for t in "${targets[@]}"; do
	tc=$(toolchain_for "$t")
	rustflags=$(rustflags_for "$t")
	# shellcheck disable=SC2207 # word-split on purpose: flags
	bs=($(build_std_flags test))
	log "cargo +$tc test ${bs[*]} --lib --target $t (runner: $(qemu_for "$t"))"
	start=$(date +%s)
	status=ok
	# qemu-user can deadlock the fork of a multi-threaded process (the child never reaches
	# exec): the exit-watch test, which spawns `sleep` twice, hung so on armv7 once. It
	# runs natively in `cargo test`; under qemu it is skipped until it spawns in a way
	# qemu-user survives.
	(cd "$PICOLET_ROOT" && RUSTFLAGS=$rustflags cargo "+$tc" test --locked "${bs[@]}" --lib --target "$t" -- \
		--skip pleg::exits::tests::an_exit_is_seen_and_a_forgotten_one_ignored "${harness[@]}") ||
		{ status=FAILED; failed=1; }
	# ARMv6: also a real TLS handshake (ring's code) on the emulated ARM1176, which traps
	# on any ARMv7 instruction — see the Tag_CPU_arch note in build-all.sh.
	if [[ "$t" == arm-* && "$status" == ok ]]; then
		log "cargo +$tc test --test apiserver https --target $t (ARM1176)"
		(cd "$PICOLET_ROOT" && RUSTFLAGS=$rustflags cargo "+$tc" test --locked "${bs[@]}" --features mock-apiserver,fakes \
			--test apiserver --target "$t" -- https) || { status=FAILED; failed=1; }
	fi
	rows+=("$(printf '%-32s %-18s %6ds  %s' "$t" "$tc" "$(($(date +%s) - start))" "$status")")
done

printf '\n%-32s %-18s %7s  %s\n' target rustc time status
for r in "${rows[@]}"; do echo "$r"; done
[ "$failed" -eq 0 ] || die "unit tests failed under qemu"
