# shellcheck shell=bash
# Shared settings for the packaging scripts (sourced, not run).
#
# Targets and their toolchain. The three release builds use one pinned nightly with its
# `rust-src`: cargo builds std itself (`-Zbuild-std`) with picolet's release profile
# (opt-level "z", fat LTO together with picolet, panic=abort), with std's `optimize_for_size`
# and without its backtrace symbolizer (std feature `backtrace` off: a panic still prints
# its message and file:line). Why a nightly: `-Zbuild-std` is unstable, and
# RUSTC_BOOTSTRAP on a stable toolchain would be the same nightly feature in disguise. A
# by-product: rustup publishes no rust-std of the 32-bit musl targets after 1.93.0 (armv7) /
# 1.90.0 (armv6), which pinned each target to a different old stable until here; now all
# three build with the same compiler. The musl C runtime (crt objects, libc.a, libunwind.a:
# rustc's "self-contained" objects, which a std built from source does not include) comes
# from a target's rust-std: the nightly's own for aarch64, the last published stable's for
# the 32-bit targets (musl_runtime_for). Override with PICOLET_TOOLCHAIN.
# packaging/README.md ("Toolchain") says more; Yocto and OpenWrt build otherwise (ibid).

# shellcheck disable=SC2034  # used by the scripts that source this file
PICOLET_TARGETS=(aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf arm-unknown-linux-musleabihf)

PICOLET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PICOLET_ROOT/target}
# shellcheck disable=SC2034
PICOLET_DIST=${PICOLET_DIST:-$CARGO_TARGET_DIR/dist}

# Size budgets (bytes, stripped, static), for the full build: every default feature on every
# target, debug-level log lines included (budget_full_for: aarch64 3.25 MiB, the 32-bit ARM
# 4 MiB, whose code is larger; PICOLET_BUDGET_FULL overrides all three), and for the
# static-pods-only build (--no-default-features).
PICOLET_BUDGET_STATIC=${PICOLET_BUDGET_STATIC:-$((3 * 1024 * 1024))}

budget_full_for() {
	if [ -n "${PICOLET_BUDGET_FULL:-}" ]; then
		echo "$PICOLET_BUDGET_FULL"
		return
	fi
	case "$1" in
	aarch64-*) echo $((13 * 256 * 1024)) ;;
	*) echo $((4 * 1024 * 1024)) ;;
	esac
}

# The default features, in Cargo.toml's order (`default = [...]` of [features]).
default_features() {
	awk '/^\[/{p = ($0 == "[features]")} p && /^default *=/' "$PICOLET_ROOT/Cargo.toml" |
		sed 's/.*\[//; s/\].*//; s/[",]/ /g' | xargs
}

# variant_feature_flags full|static-only|-<feature>: the cargo feature flags of a build
# variant; -<feature> is every default feature but that one. A feature that needs the one
# left out goes with it (in-place-resize needs apiserver): its cost is counted in that one's.
variant_feature_flags() {
	local v=$1 f rest=()
	case "$v" in
	full) ;;
	static-only) echo "--no-default-features" ;;
	-*)
		for f in $(default_features); do
			[ "$f" = "${v#-}" ] && continue
			if [ "${v#-}" = apiserver ] && [ "$f" = in-place-resize ]; then continue; fi
			rest+=("$f")
		done
		echo "--no-default-features --features $(IFS=,; echo "${rest[*]}")"
		;;
	*) echo "unknown variant $v" >&2; return 1 ;;
	esac
}

PICOLET_TOOLCHAIN=${PICOLET_TOOLCHAIN:-nightly-2026-10-01}

toolchain_for() {
	case "$1" in
	aarch64-unknown-linux-musl | armv7-unknown-linux-musleabihf | arm-unknown-linux-musleabihf)
		echo "$PICOLET_TOOLCHAIN" ;;
	*) echo "unknown target $1" >&2; return 1 ;;
	esac
}

# musl_runtime_for TARGET: the toolchain whose rust-std of TARGET carries the musl C runtime
# (lib/rustlib/TARGET/lib/self-contained: crt1.o … libc.a, libunwind.a, musl 1.2.5). The
# objects are C, built from musl's release, the same in every toolchain that ships them.
musl_runtime_for() {
	case "$1" in
	aarch64-*) echo "$PICOLET_TOOLCHAIN" ;;
	armv7-*) echo 1.93.0 ;;
	arm-*) echo 1.90.0 ;;
	esac
}

musl_runtime_dir_for() {
	local sysroot
	sysroot=$(rustup run "$(musl_runtime_for "$1")" rustc --print sysroot) || return 1
	echo "$sysroot/lib/rustlib/$1/lib/self-contained"
}

# build_std_flags release|test: the cargo flags that build std from source. A release build links
# panic_abort; a test build unwinds (the test harness catches its panics) and needs `test`.
build_std_flags() {
	if [ "$1" = test ]; then
		echo "-Zbuild-std=std,panic_unwind,test -Zbuild-std-features=panic-unwind,optimize_for_size"
	else
		echo "-Zbuild-std=std,panic_abort -Zbuild-std-features=optimize_for_size"
	fi
}

# rustflags_for TARGET: the compiler flags of a target's builds (RUSTFLAGS: with --target they
# reach the target's crates and std, not the build scripts). Paths must have no spaces.
#  - the musl C runtime's directory as a native search path: rustc looks there for the crt
#    objects, the linker for libc.a and libunwind.a;
#  - source paths remapped (the cargo registry's, the toolchain's rust-src, the checkout's):
#    a panic's location reads `tokio-1.54.1/src/…:123`, `library/std/src/…`, `src/…`
#    instead of `/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-…`, and the
#    binary no longer depends on where it was built;
#  - armv7: Thumb-2 code (`+thumb-mode`): every ARMv7-A core runs it at full speed (Android's
#    default for 32-bit ARM), and it is 30 % smaller than ARM code. The target stays
#    armv7-unknown-linux-musleabihf (VFPv3, no NEON needed). ARMv6 (ARM1176) has only
#    Thumb-1, which cannot encode VFP instructions: the armv6 build stays in ARM code;
#  - rust-lld with identical code folding (`--icf=all`): functions whose machine code is the
#    same (LLVM's copies of one generic function for types of the same layout) are kept
#    once. Two such functions then share an address; nothing in picolet compares function
#    addresses. Debian's cross gcc stays the linker driver.
rustflags_for() {
	local t=$1 sysroot registry flags
	sysroot=$(rustup run "$PICOLET_TOOLCHAIN" rustc --print sysroot) || return 1
	flags="-L native=$(musl_runtime_dir_for "$t")"
	for registry in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
		[ -d "$registry" ] && flags="$flags --remap-path-prefix=$registry="
	done
	flags="$flags --remap-path-prefix=$sysroot/lib/rustlib/src/rust/="
	flags="$flags --remap-path-prefix=$PICOLET_ROOT/="
	case "$t" in
	armv7-*) flags="$flags -C target-feature=+thumb-mode" ;;
	esac
	flags="$flags -Zunstable-options -C linker-features=+lld -C link-self-contained=+linker"
	flags="$flags -C link-arg=-Wl,--icf=all"
	echo "$flags"
}

# Linker / C compiler packages (Debian) for a target, one per line: the cross gcc and the
# cross libc headers. apt_ensure installs without recommends, and the headers are only a
# recommend of the gcc: without them ring's C code fails with
# "bits/libc-header-start.h: No such file or directory".
cross_packages_for() {
	case "$1" in
	aarch64-*) printf '%s\n' gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
	arm*) printf '%s\n' gcc-arm-linux-gnueabihf libc6-dev-armhf-cross ;;
	esac
}

# A header of the target's cross libc: its presence is what the C builds need.
cross_header_for() {
	case "$1" in
	aarch64-*) echo /usr/aarch64-linux-gnu/include/bits/libc-header-start.h ;;
	arm*) echo /usr/arm-linux-gnueabihf/include/bits/libc-header-start.h ;;
	esac
}

# qemu-user command line that runs a static binary of the target (same as .cargo/config.toml).
qemu_for() {
	case "$1" in
	aarch64-*) echo qemu-aarch64-static ;;
	armv7-*) echo qemu-arm-static ;;
	arm-*) echo "qemu-arm-static -cpu arm1176" ;;
	esac
}

# ARM build attribute Tag_CPU_arch expected in the binary (none for aarch64).
cpu_arch_for() {
	case "$1" in
	armv7-*) echo v7 ;;
	arm-*) echo v6 ;;
	esac
}

# Debian / OpenWrt architecture names.
deb_arch_for() {
	case "$1" in
	aarch64-*) echo arm64 ;;
	arm*) echo armhf ;;
	esac
}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run as root, or through sudo when there is one.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root for: $*"
	fi
}

# Install Debian packages that are not installed yet (apt-get update once, first).
PICOLET_APT_UPDATED=${PICOLET_APT_UPDATED:-0}
apt_ensure() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	if [ "$PICOLET_APT_UPDATED" -eq 0 ]; then
		as_root apt-get update -qq
		PICOLET_APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# toolchain_install TC: the toolchain (minimal profile) if missing.
toolchain_install() {
	local tc=$1
	command -v rustup >/dev/null 2>&1 || die "rustup not found (https://rustup.rs)"
	if ! rustup toolchain list | grep -q "^$tc-"; then
		log "rustup toolchain install $tc"
		rustup toolchain install "$tc" --profile minimal >/dev/null 2>&1 ||
			die "rustup toolchain install $tc failed"
	fi
}

# Install a toolchain (minimal profile) and a target's std if missing.
rustup_ensure() {
	local tc=$1 target=$2
	toolchain_install "$tc"
	if ! rustup target list --toolchain "$tc" --installed | grep -qx "$target"; then
		log "rustup target add --toolchain $tc $target"
		rustup target add --toolchain "$tc" "$target" >/dev/null 2>&1 ||
			die "no rust-std for $target on toolchain $tc"
	fi
}

# toolchain_ensure TARGET: what a target's builds need from rustup — the pinned nightly with
# rust-src (std's sources, which -Zbuild-std compiles) and the rust-std that carries the
# target's musl C runtime (musl_runtime_for).
toolchain_ensure() {
	local t=$1 tc
	tc=$(toolchain_for "$t") || return 1
	rustup_ensure "$(musl_runtime_for "$t")" "$t"
	toolchain_install "$tc"
	if ! rustup component list --toolchain "$tc" --installed | grep -q '^rust-src'; then
		log "rustup component add --toolchain $tc rust-src"
		rustup component add --toolchain "$tc" rust-src >/dev/null 2>&1 ||
			die "rustup component add --toolchain $tc rust-src failed"
	fi
	[ -f "$(musl_runtime_dir_for "$t")/libc.a" ] ||
		die "no musl C runtime for $t in $(musl_runtime_dir_for "$t")"
}

# Package version from Cargo.toml ([package] version).
picolet_version() {
	awk -F'"' '/^\[/{p = ($0 == "[package]")} p && /^version *=/{print $2; exit}' \
		"$PICOLET_ROOT/Cargo.toml"
}
