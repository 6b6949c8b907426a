#!/usr/bin/env bash
# Build picolet's fully static release binaries for the ARM boards and check them.
#
#   packaging/build-all.sh [--no-install] [--targets "T1 T2"] [--static-only-targets "T…"|all|none]
#
# For every target: installs what is missing (Debian cross gcc used as linker, qemu-user,
# the pinned rustup toolchain and target std; see packaging/lib.sh), builds
# `cargo +<toolchain> build --release --target <T>` with .cargo/config.toml, checks that the
# binary is static, stripped and for the right CPU, runs `picolet --version` under qemu-user,
# copies it to $PICOLET_DIST/picolet-<T>, and checks the size budget:
#   full build (default features)                 <= 4 MiB stripped
#   static-pods-only build (--no-default-features) <= 3 MiB stripped (picolet-<T>-static)
# The static-only variant is built for aarch64 (the largest binary) unless told otherwise.
# A build over budget fails the script. Prints a table of sizes and build times.
#
# Environment: CARGO_TARGET_DIR (default target/), PICOLET_DIST (default $CARGO_TARGET_DIR/dist),
# PICOLET_TOOLCHAIN_{AARCH64,ARMV7,ARMV6}, PICOLET_BUDGET_{FULL,STATIC} (bytes).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"

install=1
targets=("${PICOLET_TARGETS[@]}")
static_targets=(aarch64-unknown-linux-musl arm-unknown-linux-musleabihf)
while [ $# -gt 0 ]; do
	case "$1" in
	--no-install) install=0 ;;
	--targets) read -r -a targets <<<"$2"; shift ;;
	--static-only-targets)
		case "$2" in
		all) static_targets=("${PICOLET_TARGETS[@]}") ;;
		none) static_targets=() ;;
		*) read -r -a static_targets <<<"$2" ;;
		esac
		shift ;;
	-h | --help) sed -n '2,20p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done

if [ "$install" -eq 1 ]; then
	pkgs=(file binutils qemu-user-static)
	for t in "${targets[@]}"; do mapfile -t -O "${#pkgs[@]}" pkgs < <(cross_packages_for "$t"); done
	apt_ensure "${pkgs[@]}"
	for t in "${targets[@]}"; do rustup_ensure "$(toolchain_for "$t")" "$t"; done
fi

mkdir -p "$PICOLET_DIST"
rows=()
failed=0

# check_binary <target> <file>: static, stripped, right machine and CPU, starts under qemu.
check_binary() {
	local t=$1 bin=$2 variant=${3:-full} desc want_arch got_arch qemu out
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
		# The full armv6 build links ring (TLS for the apiserver), whose perlasm objects
		# carry `.arch armv7-a` for NEON code it only runs when AT_HWCAP reports NEON; the
		# attribute of the whole binary then says v7. The static-only armv6 build (no
		# ring) must say v6, and test-arm.sh runs the TLS tests on an emulated ARM1176
		# (Pi Zero), where an ARMv7 instruction would trap.
		if [ "$got_arch" != "$want_arch" ] &&
			! { [ "$variant" = full ] && [ "$want_arch" = v6 ] && [ "$got_arch" = v7 ]; }; then
			echo "Tag_CPU_arch is $got_arch, want $want_arch" >&2
			return 1
		fi
	fi
	qemu=$(qemu_for "$t")
	# shellcheck disable=SC2086  # $qemu is a command with arguments
	if ! out=$($qemu "$bin" --version 2>&1); then
		echo "does not start under $qemu: $out" >&2; return 1
	fi
}

# build <target> <variant: full|static>
build() {
	local t=$1 variant=$2 tc out start secs size budget status flags=()
	tc=$(toolchain_for "$t")
	out="$PICOLET_DIST/picolet-$t"
	budget=$(budget_full_for "$t")
	if [ "$variant" = static ]; then
		flags=(--no-default-features)
		out="$out-static"
		budget=$PICOLET_BUDGET_STATIC
	fi
	# The full build's per-target features (the static-pods-only one has its own flag).
	if [ "$variant" = full ]; then
		# shellcheck disable=SC2207 # word-split on purpose: flags
		flags+=($(features_for "$t"))
	fi
	log "cargo +$tc build --release --target $t ${flags[*]}"
	start=$(date +%s)
	(cd "$PICOLET_ROOT" && cargo "+$tc" build --locked --release --target "$t" "${flags[@]}")
	secs=$(($(date +%s) - start))
	cp "$CARGO_TARGET_DIR/$t/release/picolet" "$out"
	size=$(stat -c %s "$out")
	status=ok
	if ! check_binary "$t" "$out" "$variant"; then
		status=BAD-BINARY
		failed=1
	elif [ "$size" -gt "$budget" ]; then
		status=OVER-BUDGET
		failed=1
	fi
	rows+=("$(awk -v t="$t" -v tc="$tc" -v v="$variant" -v sz="$size" -v b="$budget" \
		-v s="$secs" -v st="$status" \
		'BEGIN { printf "%-32s %-7s %-7s %10d %8.2f %8.2f %6ds  %s", t, tc, v, sz, sz / 1048576, b / 1048576, s, st }')")
}

for t in "${targets[@]}"; do
	build "$t" full
	for s in "${static_targets[@]}"; do
		if [ "$s" = "$t" ]; then build "$t" static; fi
	done
done

printf '\n%-32s %-7s %-7s %10s %8s %8s %7s  %s\n' target rustc variant bytes MiB budget time status
for r in "${rows[@]}"; do echo "$r"; done
echo
if [ "$failed" -ne 0 ]; then
	die "a binary is over its size budget or not a static ARM binary (see the table)"
fi
log "binaries in $PICOLET_DIST"
