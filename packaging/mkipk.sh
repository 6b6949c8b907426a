#!/usr/bin/env bash
# Assemble an OpenWrt .ipk (opkg: OpenWrt 24.10 and earlier) from a prebuilt static binary,
# the way OpenWrt's ipkg-build lays it out: a gzipped tar of ./debian-binary,
# ./control.tar.gz and ./data.tar.gz. No OpenWrt SDK needed. (OpenWrt snapshots use apk
# instead: build those with the feeds Makefile in packaging/openwrt/ in the SDK.)
#
#   packaging/mkipk.sh <rust-target> <binary> [outdir]
#
# The package architecture must be one that `opkg print-architecture` lists on the
# router; the defaults below are the common ones, override with OPENWRT_ARCH=...:
#   aarch64-unknown-linux-musl      -> aarch64_cortex-a53 (mediatek/filogic, Pi 3; Pi 4: aarch64_cortex-a72)
#   armv7-unknown-linux-musleabihf  -> arm_cortex-a7_neon-vfpv4 (ipq40xx, Pi 2, sunxi)
#   arm-unknown-linux-musleabihf    -> arm_arm1176jzf-s_vfp (bcm2708: Pi Zero / Pi 1)
# The binary is static, so it runs on any of them whatever the router's libc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=packaging/lib.sh
. "$here/lib.sh"

[ $# -ge 2 ] || die "usage: $0 <rust-target> <binary> [outdir]"
target=$1 bin=$2 outdir=${3:-$PICOLET_DIST}
case "$target" in
aarch64-unknown-linux-musl) default_arch=aarch64_cortex-a53 ;;
armv7-unknown-linux-musleabihf) default_arch=arm_cortex-a7_neon-vfpv4 ;;
arm-unknown-linux-musleabihf) default_arch=arm_arm1176jzf-s_vfp ;;
*) die "unsupported target $target" ;;
esac
arch=${OPENWRT_ARCH:-$default_arch}
[ -f "$bin" ] || die "no binary $bin"
version="$(picolet_version)-1"
openwrt="$PICOLET_ROOT/packaging/openwrt/files"
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$PICOLET_ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data ctrl=$work/control
install -d -m 0755 "$data/usr/bin" "$data/etc/init.d" "$data/etc/config" \
	"$data/etc/kubernetes/manifests" "$ctrl"
install -m 0755 "$bin" "$data/usr/bin/picolet"
install -m 0755 "$openwrt/picolet.init" "$data/etc/init.d/picolet"
install -m 0600 "$openwrt/picolet.config" "$data/etc/config/picolet"

cat >"$ctrl/control" <<EOF
Package: picolet
Version: $version
Source: packaging/openwrt
SourceName: picolet
License: Apache-2.0
Section: utils
SourceDateEpoch: $epoch
Architecture: $arch
Installed-Size: $(du -sb "$data" | cut -f1)
Description: Kubelet for edge devices: runs the static pods in /etc/kubernetes/manifests
 as containers through a CRI runtime (containerd), in one small static binary.
EOF
echo /etc/config/picolet >"$ctrl/conffiles"
# As OpenWrt's packages do: enable + start on install, stop + disable on removal.
install -m 0755 "$PICOLET_ROOT/packaging/openwrt/ipk/postinst" "$ctrl/postinst"
install -m 0755 "$PICOLET_ROOT/packaging/openwrt/ipk/prerm" "$ctrl/prerm"

# ipkg-build: owner 0:0, sorted names, fixed mtimes, ./-prefixed members, gzip -n.
tarit() { # <dir> <out.tar.gz> <members...>
	local dir=$1 out=$2
	shift 2
	(cd "$dir" && tar --format=gnu --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime="@$epoch" -cf - "$@") | gzip -9n >"$out"
}
tarit "$ctrl" "$work/control.tar.gz" .
tarit "$data" "$work/data.tar.gz" .
echo 2.0 >"$work/debian-binary"
mkdir -p "$outdir"
out="$outdir/picolet_${version}_${arch}.ipk"
tarit "$work" "$out" ./debian-binary ./control.tar.gz ./data.tar.gz
echo "$out"
