#!/usr/bin/env bash
# Build picolet_<version>_<arch>.deb from a static binary with dpkg-deb (no debhelper, no
# cargo-deb build needed).
#
#   packaging/deb/mkdeb.sh <arm64|armhf> <binary> [outdir]
#
# armhf: Raspberry Pi OS 32-bit ("Raspbian") is ARMv6 hard-float, Debian armhf is ARMv7;
# pass the armv6 binary (arm-unknown-linux-musleabihf) and one package serves both, Pi
# Zero / Pi 1 included. build-all.sh output: $PICOLET_DIST/picolet-<target>.
#
# Contents: /usr/bin/picolet, /usr/lib/systemd/system/picolet.service and
# picolet-node-shutdown.service (the graceful node shutdown hook),
# /etc/picolet/config.yaml (conffile), /etc/kubernetes/manifests/, docs. The maintainer
# scripts enable the unit on first install but do not start it (configure first, then
# `systemctl start picolet`); an upgrade restarts a running picolet, which leaves the pods
# running (KillMode=process).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=packaging/lib.sh
. "$here/../lib.sh"

[ $# -ge 2 ] || die "usage: $0 <arm64|armhf> <binary> [outdir]"
arch=$1 bin=$2 outdir=${3:-$PICOLET_DIST}
case "$arch" in arm64 | armhf) ;; *) die "arch must be arm64 or armhf" ;; esac
[ -f "$bin" ] || die "no binary $bin"
version=$(picolet_version)
[ -n "$version" ] || die "no version in Cargo.toml"
pkg="picolet_${version}_${arch}.deb"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
	"$root/etc/picolet" "$root/etc/kubernetes/manifests" "$root/usr/share/doc/picolet" \
	"$root/usr/share/picolet" "$root/var/lib/picolet/images"
install -m 0755 "$bin" "$root/usr/bin/picolet"
install -m 0644 "$PICOLET_ROOT/packaging/systemd/picolet.service" "$root/usr/lib/systemd/system/"
install -m 0644 "$PICOLET_ROOT/packaging/systemd/picolet-node-shutdown.service" "$root/usr/lib/systemd/system/"
install -m 0644 "$PICOLET_ROOT/packaging/systemd/picolet.yaml" "$root/etc/picolet/config.yaml"
install -m 0644 "$PICOLET_ROOT/packaging/README.md" "$root/usr/share/doc/picolet/README.md"
# The runtime's side of the image mirror: postinst copies each into place when absent.
install -m 0644 "$PICOLET_ROOT/packaging/runtime/containerd-hosts.toml" \
	"$PICOLET_ROOT/packaging/runtime/crio-registries.conf" "$root/usr/share/picolet/"
cat >"$root/usr/share/doc/picolet/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: picolet

Files: *
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
chmod 0644 "$root/usr/share/doc/picolet/copyright"

installed_kib=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: picolet
Version: $version
Architecture: $arch
Maintainer: picolet maintainers <picolet@localhost>
Installed-Size: $installed_kib
Section: admin
Priority: optional
Recommends: containerd, runc, containernetworking-plugins
Description: kubelet for edge devices (static pods over CRI)
 picolet runs the static pods in /etc/kubernetes/manifests as containers
 through a CRI runtime such as containerd, like the kubelet, in one small
 fully static binary for Raspberry Pi and other ARM boards.
EOF
echo /etc/picolet/config.yaml >"$root/DEBIAN/conffiles"

for script in postinst prerm postrm; do
	install -m 0755 "$here/$script" "$root/DEBIAN/$script"
done

mkdir -p "$outdir"
# Reproducible: fixed owner, mtimes from SOURCE_DATE_EPOCH when set.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
fi
dpkg-deb --root-owner-group -Zxz --build "$root" "$outdir/$pkg" >/dev/null
echo "$outdir/$pkg"
