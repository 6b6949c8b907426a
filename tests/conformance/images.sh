#!/usr/bin/env bash
# The container images of the node conformance run, made locally under their
# upstream names and loaded into the lab's runtime without a registry:
#
#   tests/conformance/images.sh build DIR        one OCI archive per image into DIR
#                                                (mkimage.py); prints "name<TAB>archive"
#   tests/conformance/images.sh load DIR LAB     image-import every archive of DIR into the lab
#   tests/conformance/images.sh list             every image e2e.test names, and what we do
#
# Names: what the pinned e2e.test asks for (`e2e.test --list-images`, i.e.
# test/utils/image/manifest.go of k8s.io/kubernetes at KUBERNETES_VERSION), so a new version
# brings its tags with it. e2e.test, agnhost and nnp come from tests/upstream/build.sh (built
# there when missing). Each image is made by a recipe below; the recipes say what differs
# from upstream's image and why it does not matter to the tests that use it. An image with
# no recipe is not made: `list` says which tests would need it (none of the node areas').
#
# Every image is one busybox layer (tests/e2e/mkimage.py, every applet; busybox 1.37.0 built
# from its release, as upstream's busybox image: busybox_bin below) plus what its recipe adds.
# Byte-reproducible like mkimage.py's for one busybox build.
set -euo pipefail
shopt -s inherit_errexit

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
BUILD=$REPO/tests/upstream/build.sh
MKIMAGE=$REPO/tests/e2e/mkimage.py
LAB_SH=$REPO/tests/e2e/lab.sh
# shellcheck source=tests/upstream/versions.sh
. "$REPO/tests/upstream/versions.sh"

say() { printf 'images: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# busybox: upstream's busybox image (test/images/busybox) is Docker's busybox of its version,
# upstream source. Debian's busybox-static is not: Debian patches ash to drop environment
# entries whose names are not shell identifiers (data-1=...; temp-deb-installer-hack.patch),
# which the envFrom specs read with `sh -c env`, and Debian 12's 1.35 words errors otherwise
# than 1.37. So busybox is built here: BusyBox's own release tarball (Debian's pool keeps it as
# the orig tarball; pinned by SHA256), upstream's defconfig, static, tc left out (its CBQ code
# no longer builds against current kernel headers), into tests/upstream/build.sh's cache.
BUSYBOX_VERSION=1.37.0
BUSYBOX_SHA256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
BUSYBOX_URL=${PICOLET_DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/main/b/busybox/busybox_$BUSYBOX_VERSION.orig.tar.bz2
UPSTREAM_CACHE=${PICOLET_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picolet/upstream}

# busybox_bin: the path of that busybox, built once (~30 s on 2 CPUs).
busybox_bin() {
	local dir work pkgs=() p
	dir=$UPSTREAM_CACHE/busybox-$BUSYBOX_VERSION-$(uname -m)
	if [[ -x $dir/bin/busybox ]]; then
		echo "$dir/bin/busybox"
		return
	fi
	command -v gcc >/dev/null || pkgs+=(gcc)
	command -v make >/dev/null || pkgs+=(make)
	command -v bzip2 >/dev/null || pkgs+=(bzip2)
	for p in libc6-dev linux-libc-dev; do dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p"); done
	if ((${#pkgs[@]})); then
		say "apt-get install ${pkgs[*]} (to build busybox)"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null; } ||
			die "apt-get install ${pkgs[*]} failed"
	fi
	work=$(mktemp -d)
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '$work'" RETURN
	say "busybox $BUSYBOX_VERSION: building from $BUSYBOX_URL"
	curl -fsSL --retry 3 -m 300 -o "$work/src.tar.bz2" "$BUSYBOX_URL" || die "fetch $BUSYBOX_URL failed"
	sha256sum -c --status <<<"$BUSYBOX_SHA256  $work/src.tar.bz2" || die "$BUSYBOX_URL: SHA256 mismatch"
	tar -xjf "$work/src.tar.bz2" -C "$work"
	(
		cd "$work/busybox-$BUSYBOX_VERSION"
		make defconfig
		sed -i -e 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' -e 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' .config
		yes '' | make oldconfig
		grep -qx 'CONFIG_STATIC=y' .config || exit 1
		make -j"$(nproc)" busybox
	) >"$work/build.log" 2>&1 || { tail -n 20 "$work/build.log" >&2; die "busybox build failed"; }
	mkdir -p "$dir/bin"
	install -m 0755 "$work/busybox-$BUSYBOX_VERSION/busybox" "$dir/bin/busybox.new"
	mv "$dir/bin/busybox.new" "$dir/bin/busybox"
	say "busybox $BUSYBOX_VERSION in $dir/bin"
	echo "$dir/bin/busybox"
}

# The images e2e.test names (its manifest, with the default registries).
e2e_images() {
	local e2e
	e2e=$("$BUILD" --path e2e.test)
	"$e2e" --list-images 2>/dev/null | sort -u
}

# recipe NAME: the recipe that makes an image (empty: none). By repository, every tag.
recipe() {
	case "${1%:*}" in
	registry.k8s.io/e2e-test-images/busybox) echo busybox ;;
	registry.k8s.io/e2e-test-images/agnhost) echo agnhost ;;
	registry.k8s.io/pause) echo pause ;;
	registry.k8s.io/e2e-test-images/nginx) echo nginx ;;
	registry.k8s.io/e2e-test-images/nonroot) echo nonroot ;;
	registry.k8s.io/e2e-test-images/nonewprivs) echo nonewprivs ;;
	registry.k8s.io/e2e-test-images/glibc-dns-testing) echo glibc-dns-testing ;;
	esac
}

# What each recipe makes, and how it differs from upstream's image (for `list`).
describe() {
	case "$1" in
	busybox) echo "busybox $BUSYBOX_VERSION built from its release (defconfig, static, no tc), every applet, CMD sh. Upstream: Docker's busybox $BUSYBOX_VERSION (the same source)" ;;
	agnhost) echo "agnhost built from test/images/agnhost of k8s.io/kubernetes $KUBERNETES_VERSION (build.sh agnhost) as /agnhost, ENTRYPOINT /agnhost CMD pause, /agnhost-2, /uploads, porter's localhost.crt/key, user-defined-in-image (1000) in group-defined-in-image (50000); /bin/bash and /bin/sh are Debian's bash-static; curl is a busybox-wget script (GET only) and nc a bash script (UDP by /dev/udp, TCP by busybox nc): tests/conformance/bin; no dig, coredns, iperf, socat, fake registry. Upstream: alpine 3.21 + packages. Every tag is the same binary (2.55, 'AgnhostPrev', reports the pinned version)" ;;
	pause) echo "busybox sh that waits, exits 0 on TERM/INT (as the lab's localhost/pause:edge). Upstream: the C pause (same behaviour)" ;;
	nginx) echo "SUBSTITUTE: busybox httpd in the foreground on port 80 serving /usr/share/nginx/html (index.html 'Welcome to nginx!'). Upstream: nginx on alpine" ;;
	nonroot) echo "busybox, USER 1234 (upstream: the same on a busybox base)" ;;
	nonewprivs) echo "busybox + /usr/local/bin/nnp (build.sh nnp, test/images/nonewprivs) setuid root, CMD nnp (upstream: the same on alpine)" ;;
	glibc-dns-testing) echo "SUBSTITUTE: busybox (hostname, hostname -f from /etc/hosts). Upstream: debian bookworm with dnsutils and coredns (dig, nslookup with glibc)" ;;
	esac
}

# The busybox image's arguments for mkimage.py (every recipe starts from them; cmd_build adds
# --busybox).
BASE=(--all-applets)

# make_one NAME RECIPE ARCHIVE: the archive for one image.
make_one() {
	local name=$1 recipe=$2 out=$3 work args=()
	work=$(dirname "$out")/.work
	mkdir -p "$work"
	case "$recipe" in
	busybox) args=(--cmd sh) ;;
	pause)
		# kubernetes: build/pause/linux/pause.c sleeps until SIGINT/SIGTERM and exits 0 then.
		args=(--entrypoint /bin/busybox --entrypoint sh --entrypoint=-c
			--entrypoint 'trap "exit 0" TERM INT; busybox sleep infinity & wait')
		;;
	agnhost)
		local agnhost kdir
		agnhost=$("$BUILD" --path agnhost)
		kdir=$(cd "$(dirname "$BUILD")" && GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[[ -d $kdir/test/images/agnhost/porter ]] || die "no k8s.io/kubernetes module source at '$kdir'"
		# curl and nc: stand-ins for Alpine's, for the forms the tests run (see each file).
		# /bin/sh is bash too: a busybox built to prefer its applets (Debian's) runs its own nc
		# whatever PATH says, so `sh -c "... | nc -u ..."` would not reach /usr/bin/nc.
		args=(--add "$agnhost:/agnhost:0755" --symlink agnhost-2:agnhost
			--add /bin/bash-static:/bin/bash:0755 --add /bin/bash-static:/bin/sh:0755
			--add "$SCRIPT_DIR/bin/curl:/usr/bin/curl:0755"
			--add "$SCRIPT_DIR/bin/nc:/usr/bin/nc:0755"
			--add "$kdir/test/images/agnhost/porter/localhost.crt:/localhost.crt:0644"
			--add "$kdir/test/images/agnhost/porter/localhost.key:/localhost.key:0644"
			--dir /uploads:0755 --dir /home/user-defined-in-image:0755
			--passwd 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh'
			--group 'user-defined-in-image:x:1000:'
			--group 'group-defined-in-image:x:50000:user-defined-in-image'
			--entrypoint /agnhost --cmd pause)
		;;
	nginx)
		printf '<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n' >"$work/index.html"
		args=(--add "$work/index.html:/usr/share/nginx/html/index.html:0644"
			--cmd=httpd --cmd=-f --cmd=-p --cmd=80 --cmd=-h --cmd=/usr/share/nginx/html)
		;;
	nonroot) args=(--cmd sh --user 1234) ;;
	nonewprivs)
		local nnp
		nnp=$("$BUILD" --path nnp)
		args=(--add "$nnp:/usr/local/bin/nnp:04755" --cmd nnp)
		;;
	glibc-dns-testing) args=(--cmd sh) ;;
	*) die "no recipe '$recipe'" ;;
	esac
	python3 "$MKIMAGE" --name "$name" -o "$out" "${BASE[@]}" "${args[@]}" 2>/dev/null ||
		die "mkimage.py $name failed"
}

cmd_build() {
	local dir=${1:?build DIR} name r file busybox n=0
	mkdir -p "$dir"
	if [[ ! -x /bin/bash-static ]]; then
		echo "images: apt-get install bash-static" >&2
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bash-static >/dev/null; } ||
			die "/bin/bash-static missing and apt-get install bash-static failed"
	fi
	# Built before the loop: their build logs go to stderr, once.
	"$BUILD" e2e.test agnhost nnp >/dev/null
	busybox=$(busybox_bin)
	BASE+=(--busybox "$busybox")
	while read -r name; do
		r=$(recipe "$name")
		[[ -n $r ]] || continue
		file="$dir/$(tr '/:' '__' <<<"$name").tar"
		make_one "$name" "$r" "$file"
		printf '%s\t%s\n' "$name" "$file"
		n=$((n + 1))
	done < <(e2e_images)
	rm -rf "$dir/.work"
	say "$n images in $dir"
}

cmd_load() {
	local dir=${1:?load DIR LAB} lab=${2:?load DIR LAB} f n=0
	for f in "$dir"/*.tar; do
		[[ -f $f ]] || continue
		"$LAB_SH" image-import "$f" "$lab" 2>/dev/null || die "lab.sh image-import $f failed"
		n=$((n + 1))
	done
	((n > 0)) || die "no archives in $dir"
	say "$n images loaded into $lab"
}

cmd_list() {
	local name r
	while read -r name; do
		r=$(recipe "$name")
		if [[ -n $r ]]; then
			printf '%s\t%s\n' "$name" "$(describe "$r")"
		elif [[ $name == invalid.registry.k8s.io/* ]]; then
			printf '%s\tnot made: its test expects the pull to fail\n' "$name"
		else
			printf '%s\tnot made: used by no node-area test (see tests/conformance/CONFORMANCE.md)\n' "$name"
		fi
	done < <(e2e_images)
}

case "${1:-}" in
build) cmd_build "${2:-}" ;;
load) cmd_load "${2:-}" "${3:-}" ;;
list) cmd_list ;;
*) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
