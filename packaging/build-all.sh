#!/usr/bin/env bash
# Build picolet's fully static release binaries for the ARM boards, check them, and print
# what each default feature costs on each target.
#
#   packaging/build-all.sh [--no-install] [--targets "T1 T2"] [--no-table]
#
# For every target: installs what is missing (Debian cross gcc as the linker driver,
# qemu-user, the pinned nightly with rust-src and the target's musl C runtime; see
# packaging/lib.sh), builds `cargo +<toolchain> build --release --target <T>` with std built
# from source (build_std_flags) and the target's rustflags (rustflags_for), and checks that
# the binary is static, stripped, for the right CPU, and that `picolet --version` under
# qemu-user names every default feature and `log: debug`. Builds per target:
#   full         every default feature, debug-level log lines included   <= budget_full_for
#   static-only  --no-default-features (the static-pods-only agent)      <= PICOLET_BUDGET_STATIC
#   -<feature>   every default feature but one: the feature's marginal cost is
#                full - (full without it)   (not with --no-table)
# The full build is copied to $PICOLET_DIST/picolet-<T>, the static-only one to
# picolet-<T>-static. The per-feature table is printed and written to $PICOLET_DIST/sizes.txt.
# Two builds run side by side (each in its own target dir): a release build's fat LTO uses
# one core. A build over budget, or a bad binary, fails the script.
#
# Environment: CARGO_TARGET_DIR (default target/), PICOLET_DIST (default $CARGO_TARGET_DIR/dist),
# PICOLET_TOOLCHAIN, PICOLET_BUDGET_{FULL,STATIC} (bytes).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"

install=1 table=1
targets=("${PICOLET_TARGETS[@]}")
while [ $# -gt 0 ]; do
	case "$1" in
	--no-install) install=0 ;;
	--no-table) table=0 ;;
	--targets) read -r -a targets <<<"$2"; shift ;;
	-h | --help) sed -n '2,25p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done

if [ "$install" -eq 1 ]; then
	pkgs=(file binutils qemu-user-static)
	for t in "${targets[@]}"; do mapfile -t -O "${#pkgs[@]}" pkgs < <(cross_packages_for "$t"); done
	apt_ensure "${pkgs[@]}"
	for t in "${targets[@]}"; do toolchain_ensure "$t"; done
fi

mkdir -p "$PICOLET_DIST"
read -r -a features <<<"$(default_features)"
[ "${#features[@]}" -gt 0 ] || die "no default features found in Cargo.toml"
failed=0

# check_binary <target> <file> <variant>: static, stripped, right machine and CPU, starts
# under qemu; the full build's --version names every default feature and the debug level.
check_binary() {
	local t=$1 bin=$2 variant=$3 desc want_arch got_arch qemu out f
	desc=$(file -b "$bin")
	case "$desc" in
	*"statically linked"* | *"static-pie linked"*) ;;
	*) echo "not static: $desc" >&2; return 1 ;;
	esac
	if readelf -lW "$bin" | grep -q 'Requesting program interpreter'; then
		echo "has a program interpreter" >&2; return 1
	fi
	if readelf -dW "$bin" 2>/dev/null | grep -q '(NEEDED)'; then
		echo "needs shared libraries" >&2; return 1
	fi
	case "$desc" in
	*", stripped"*) ;;
	*) echo "not stripped: $desc" >&2; return 1 ;;
	esac
	case "$t" in
	aarch64-*) [[ "$desc" == *"ARM aarch64"* ]] || { echo "not aarch64: $desc" >&2; return 1; } ;;
	arm*) [[ "$desc" == *"32-bit"*"ARM, EABI5"* ]] || { echo "not 32-bit ARM: $desc" >&2; return 1; } ;;
	esac
	want_arch=$(cpu_arch_for "$t")
	if [ -n "$want_arch" ]; then
		got_arch=$(readelf -A "$bin" | awk '/Tag_CPU_arch:/{print $2; exit}')
		# The armv6 builds with TLS link ring, whose perlasm objects carry `.arch armv7-a`
		# for NEON code it only runs when AT_HWCAP reports NEON; the attribute of the whole
		# binary then says v7. The static-only armv6 build (no ring) must say v6, and
		# test-arm.sh runs the TLS tests on an emulated ARM1176 (Pi Zero), where an ARMv7
		# instruction would trap.
		if [ "$got_arch" != "$want_arch" ] &&
			! { [ "$variant" != static-only ] && [ "$want_arch" = v6 ] && [ "$got_arch" = v7 ]; }; then
			echo "Tag_CPU_arch is $got_arch, want $want_arch" >&2
			return 1
		fi
	fi
	qemu=$(qemu_for "$t")
	# shellcheck disable=SC2086  # $qemu is a command with arguments
	if ! out=$($qemu "$bin" --version 2>&1); then
		echo "does not start under $qemu: $out" >&2; return 1
	fi
	if [ "$variant" = full ]; then
		for f in "${features[@]}"; do
			grep -q "^features:.* $f\( \|;\)" <<<"$out" ||
				{ echo "--version does not name feature $f: $out" >&2; return 1; }
		done
		grep -q '; log: debug$' <<<"$out" ||
			{ echo "--version does not say log: debug: $out" >&2; return 1; }
	fi
	echo "$variant: $out" | tr '\n' ' '
	echo
}

# build <target> <variant> <lane>: one release build in the lane's target dir; prints
# "<variant> <bytes> <seconds>" on success to the lane's result file.
build() {
	local t=$1 v=$2 lane=$3 tc dir start secs bin rustflags flags=()
	tc=$(toolchain_for "$t")
	dir=$CARGO_TARGET_DIR/lane$lane
	# shellcheck disable=SC2207 # word-split on purpose: flags
	flags=($(build_std_flags release) $(variant_feature_flags "$v"))
	rustflags=$(rustflags_for "$t")
	log "[$t $v] cargo +$tc build --release --target $t ${flags[*]}"
	start=$(date +%s)
	(cd "$PICOLET_ROOT" && CARGO_TARGET_DIR=$dir RUSTFLAGS=$rustflags \
		cargo "+$tc" build --locked --release --target "$t" "${flags[@]}") ||
		{ echo "$v build-failed 0"; return 0; }
	secs=$(($(date +%s) - start))
	bin=$PICOLET_DIST/picolet-$t.$v
	cp "$dir/$t/release/picolet" "$bin"
	echo "$v $(stat -c %s "$bin") $secs"
}

# lanes <target> <variants…>: the variants in two lanes side by side; results on stdout.
lanes() {
	local t=$1 i lane1=() lane2=() out1 out2 pid1 pid2 v
	shift
	local all=("$@")
	for i in "${!all[@]}"; do
		if ((i % 2 == 0)); then lane1+=("${all[$i]}"); else lane2+=("${all[$i]}"); fi
	done
	out1=$(mktemp) out2=$(mktemp)
	(for v in "${lane1[@]}"; do build "$t" "$v" 1; done) >"$out1" &
	pid1=$!
	(for v in "${lane2[@]}"; do build "$t" "$v" 2; done) >"$out2" &
	pid2=$!
	wait "$pid1" "$pid2"
	cat "$out1" "$out2"
	rm -f "$out1" "$out2"
}

# 1234567 -> 1,234,567
fmt_bytes() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }

rows=() checks=()
for t in "${targets[@]}"; do
	variants=(full static-only)
	if [ "$table" -eq 1 ]; then
		for f in "${features[@]}"; do variants+=("-$f"); done
	fi
	t_start=$(date +%s)
	declare -A size=() secs=()
	while read -r v sz s; do
		size[$v]=$sz secs[$v]=$s
	done < <(lanes "$t" "${variants[@]}")
	status=ok
	for v in "${variants[@]}"; do
		if [ "${size[$v]:-build-failed}" = build-failed ]; then
			status="BUILD-FAILED($v)"
			failed=1
			continue
		fi
		if out=$(check_binary "$t" "$PICOLET_DIST/picolet-$t.$v" "$v"); then
			checks+=("$t $out")
		else
			status="BAD-BINARY($v)"
			failed=1
		fi
	done
	budget=$(budget_full_for "$t")
	if [ "$status" = ok ]; then
		mv "$PICOLET_DIST/picolet-$t.full" "$PICOLET_DIST/picolet-$t"
		mv "$PICOLET_DIST/picolet-$t.static-only" "$PICOLET_DIST/picolet-$t-static"
		if [ "${size[full]}" -gt "$budget" ]; then status=OVER-BUDGET; failed=1; fi
		if [ "${size[static-only]}" -gt "$PICOLET_BUDGET_STATIC" ]; then
			status=OVER-BUDGET-STATIC-ONLY
			failed=1
		fi
	fi
	costs=''
	for f in "${features[@]}"; do
		if [ -n "${size[-$f]:-}" ] && [ "${size[-$f]}" != build-failed ] && [ -n "${size[full]:-}" ]; then
			cost=$((size[full] - size[-$f]))
			if ((cost >= 0)); then cost="+$(fmt_bytes "$cost")"; else cost=$(fmt_bytes "$cost"); fi
			costs+=$(printf ' %16s' "$cost")
		else
			costs+=$(printf ' %16s' -)
		fi
	done
	left=-
	[[ ${size[full]:-x} =~ ^[0-9]+$ ]] && left=$(fmt_bytes $((budget - size[full])))
	rows+=("$(printf '%-32s %12s %12s %12s %10s%s  %ds  %s' "$t" \
		"$(fmt_bytes "${size[static-only]:-0}")" "$(fmt_bytes "${size[full]:-0}")" \
		"$(fmt_bytes "$budget")" "$left" "$costs" "$(($(date +%s) - t_start))" "$status")")
	unset size secs
	rm -f "$PICOLET_DIST/picolet-$t".-*
done

{
	echo "picolet $(picolet_version), $PICOLET_TOOLCHAIN, stripped static release builds (bytes)."
	echo "full = every default feature, debug-level log lines included; a feature's cost ="
	echo "full - (full without it; apiserver's includes in-place-resize, which needs it)."
	printf '%-32s %12s %12s %12s %10s' target static-only full budget left
	for f in "${features[@]}"; do printf ' %16s' "$f"; done
	printf '  %s  %s\n' time status
	for r in "${rows[@]}"; do echo "$r"; done
} | tee "$PICOLET_DIST/sizes.txt"
echo
for c in "${checks[@]}"; do echo "$c"; done
echo
if [ "$failed" -ne 0 ]; then
	die "a binary is over its size budget or not a static ARM binary (see the table)"
fi
log "binaries in $PICOLET_DIST"
