# shellcheck shell=bash
# Shared settings for the packaging scripts (sourced, not run).
#
# Targets and their toolchains. The 32-bit musl targets have no rust-std in current
# stable: it is published up to 1.93.0 for armv7 and up to 1.90.0 for armv6. Each target
# uses the newest toolchain that has its std, pinned exactly so that a release is
# reproducible; override with PICOLET_TOOLCHAIN_<AARCH64|ARMV7|ARMV6>.
# The armv6 pin makes 1.90 the effective minimum Rust version of picolet's ARM builds.

# shellcheck disable=SC2034  # used by the scripts that source this file
PICOLET_TARGETS=(aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf arm-unknown-linux-musleabihf)

PICOLET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PICOLET_ROOT/target}
# shellcheck disable=SC2034
PICOLET_DIST=${PICOLET_DIST:-$CARGO_TARGET_DIR/dist}

# Size budgets (bytes, stripped): full build / static-pods-only build (--no-default-features).
# The full build's is per target (budget_full_for): aarch64 3.5 MiB, the 32-bit ARM 4 MiB
# (their code is larger); PICOLET_BUDGET_FULL overrides all three.
PICOLET_BUDGET_STATIC=${PICOLET_BUDGET_STATIC:-$((3 * 1024 * 1024))}

# features_for TARGET: cargo flags a target's release build adds. ARMv6 compiled its
# debug-level log lines out (`--features log/release_max_level_info`, 23 KB) from issue 34
# until the two size cuts of issue 33 (session 18) gave every target ~100 KB back. From issue
# 39, ARMv6's full build leaves the image mirror out (feature image-mirror: ~95 KB there, with
# 52 KB left under its 4 MiB budget); aarch64 and ARMv7 have it. From issue 40 the device
# manager (feature device-plugins, ~90-110 KB) is left out there too (26 KB left without it).
# From issue 41 (image volumes, pod-level resources, user namespaces: +29 KB there, 2.7 KB
# over) ARMv6 compiles its debug-level log lines out again (log/release_max_level_info,
# ~23 KB); info, warn and error lines stay. With in-place resize (issue 41, feature
# in-place-resize, on by default: aarch64 +29 KB, ARMv7 +45 KB, ARMv6 +48 KB) every target
# was over: ARMv6 leaves the feature out (as the image mirror and the device manager), and
# aarch64 and ARMv7 compile their debug-level lines out too (~25 KB each).
features_for() {
	case "$1" in
	arm-unknown-linux-musleabihf) echo "--no-default-features --features apiserver,log/release_max_level_info" ;;
	*) echo "--features log/release_max_level_info" ;;
	esac
}

budget_full_for() {
	if [ -n "${PICOLET_BUDGET_FULL:-}" ]; then
		echo "$PICOLET_BUDGET_FULL"
		return
	fi
	case "$1" in
	aarch64-*) echo $((7 * 512 * 1024)) ;;
	*) echo $((4 * 1024 * 1024)) ;;
	esac
}

toolchain_for() {
	case "$1" in
	aarch64-unknown-linux-musl) echo "${PICOLET_TOOLCHAIN_AARCH64:-1.95.0}" ;;
	armv7-unknown-linux-musleabihf) echo "${PICOLET_TOOLCHAIN_ARMV7:-1.93.0}" ;;
	arm-unknown-linux-musleabihf) echo "${PICOLET_TOOLCHAIN_ARMV6:-1.90.0}" ;;
	*) echo "unknown target $1" >&2; return 1 ;;
	esac
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

# Install a toolchain (minimal profile) and a target's std if missing.
rustup_ensure() {
	local tc=$1 target=$2
	command -v rustup >/dev/null 2>&1 || die "rustup not found (https://rustup.rs)"
	if ! rustup toolchain list | grep -q "^$tc-"; then
		log "rustup toolchain install $tc"
		rustup toolchain install "$tc" --profile minimal >/dev/null 2>&1 ||
			die "rustup toolchain install $tc failed"
	fi
	if ! rustup target list --toolchain "$tc" --installed | grep -qx "$target"; then
		log "rustup target add --toolchain $tc $target"
		rustup target add --toolchain "$tc" "$target" >/dev/null 2>&1 ||
			die "no rust-std for $target on toolchain $tc"
	fi
}

# Package version from Cargo.toml ([package] version).
picolet_version() {
	awk -F'"' '/^\[/{p = ($0 == "[package]")} p && /^version *=/{print $2; exit}' \
		"$PICOLET_ROOT/Cargo.toml"
}
