#!/usr/bin/env bash
# Builds the upstream components picolet is tested against, from their published Go modules
# at pinned versions (the Go module proxy is the only source), into a cache outside the work
# tree. A second run builds nothing.
#
#   tests/upstream/build.sh [--path] COMPONENT...     build (or find) each; --path prints only
#                                                      each binary's path, one per line
#   tests/upstream/build.sh --list                     components, versions, cached or not
#
# Components: see versions.sh (crictl; the control plane: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl; containerd2; crio (with pinns next to it);
# e2e.test, ginkgo, agnhost and nnp, the node conformance run's test binary, its runner and
# test image binaries
# (tests/conformance/); the kubelet, kubelet-arm64, kubelet-armv7 and kubemark (issue
# 37, benches/kubelet.sh: the kubelet beside picolet).
#
# containerd2 is one component of three binaries (containerd, containerd-shim-runc-v2, ctr):
# `--path containerd2` prints their directory (<cache>/containerd2-<version>/bin), which a
# user puts first on PATH (containerd finds its shim on its PATH).
#
# Cache: $PICOLET_UPSTREAM_CACHE (default ~/.cache/picolet/upstream)/<component>-<version>/.
# Go's own caches stay where Go keeps them (GOMODCACHE ~/go/pkg/mod, GOCACHE ~/.cache/go-build),
# never under the checkout. GOTOOLCHAIN defaults to `local` so that a module asking for a newer
# Go fails loudly instead of fetching one behind our back (set PICOLET_GOTOOLCHAIN to allow it).
# Never part of picolet: these binaries are test peers only.
set -euo pipefail
shopt -s inherit_errexit

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/upstream/versions.sh
. "$SCRIPT_DIR/versions.sh"

CACHE=${PICOLET_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picolet/upstream}
export GOTOOLCHAIN=${PICOLET_GOTOOLCHAIN:-local}
# Builds of test peers: no VCS stamping (no .git in module zips), paths trimmed.
export GOFLAGS="${GOFLAGS:-} -buildvcs=false -trimpath"

say() { printf 'upstream: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "no 'go' on PATH (Go >= 1.26 is part of the build machine)"
# Go's caches, and ours, must not land in a checkout (a clean tree stays clean).
CHECKOUT=$(cd "$SCRIPT_DIR/../.." && pwd)
for v in GOMODCACHE GOCACHE CACHE; do
	if [[ $v == CACHE ]]; then d=$CACHE; else d=$(go env "$v"); fi
	case "$d" in
	"$CHECKOUT" | "$CHECKOUT"/*) die "$v=$d is inside the checkout; point it elsewhere" ;;
	esac
done

KUBE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
COMPONENTS=(crictl etcd "${KUBE_COMPONENTS[@]}")
COMPONENTS+=(crio) # CRI-O: see its block below
COMPONENTS+=(e2e.test ginkgo agnhost nnp) # node conformance: see its block below
COMPONENTS+=(kubelet kubelet-arm64 kubelet-armv7 kubemark) # the kubelet: see its block below
COMPONENTS+=(sample-device-plugin generic-device-plugin) # device plugins: see their block below

# ---- containerd 2.x -------------------------------------------------------------
COMPONENTS+=(containerd2)
COMPONENTS+=(runc) # a runc with idmapped mounts for the containerd 2.x lab
CONTAINERD2_MODULE=github.com/containerd/containerd/v2
CONTAINERD2_BINS=(containerd containerd-shim-runc-v2 ctr)
# component_bins NAME: the binaries a component builds (its own name for most).
component_bins() {
	case "$1" in
	containerd2) echo "${CONTAINERD2_BINS[*]}" ;;
	kubelet-*) echo kubelet ;; # the kubelet: cross builds, see its block below
	*) echo "$1" ;;
	esac
}
# component_output NAME DIR: what `build` prints: the binary, or for a component of several
# binaries their directory.
component_output() {
	case "$1" in
	containerd2) echo "$2/bin" ;;
	kubelet-*) echo "$2/bin/kubelet" ;;
	*) echo "$2/bin/$1" ;;
	esac
}
# ---- end containerd 2.x ----------------------------------------------------------------------

is_kube() {
	local c
	for c in "${KUBE_COMPONENTS[@]}"; do [[ $c == "$1" ]] && return 0; done
	return 1
}

# component_spec NAME → "module package version cgo" (one line) or fails.
component_spec() {
	case "$1" in
	crictl) echo "sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl $CRICTL_VERSION 0" ;;
	# etcd's main package is the root of its server module (server/main.go calls etcdmain.Main).
	etcd) echo "go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 $ETCD_VERSION 0" ;;
	crio) crio_spec ;; # CRI-O: see its block below
	e2e.test | ginkgo | agnhost | nnp) conformance_spec "$1" ;; # node conformance: see its block below
	kubelet | kubelet-arm64 | kubelet-armv7 | kubemark) kubelet_spec "$1" ;; # the kubelet: see its block below
	sample-device-plugin | generic-device-plugin) device_plugin_spec "$1" ;; # device plugins: see their block below
	# containerd 2.x: PKG is a comma-separated list (one `go install` of the three). cgo off:
	# static binaries like the release's shim (SHIM_CGO_ENABLED=0 in its Makefile).
	# runc: cgo (its nsenter is C) with libseccomp, as its Makefile's default BUILDTAGS.
	runc) echo "github.com/opencontainers/runc github.com/opencontainers/runc $RUNC_VERSION 1" ;;
	containerd2)
		local b pkgs=()
		for b in "${CONTAINERD2_BINS[@]}"; do pkgs+=("$CONTAINERD2_MODULE/cmd/$b"); done
		echo "$CONTAINERD2_MODULE $(
			IFS=,
			echo "${pkgs[*]}"
		) $CONTAINERD2_VERSION 0"
		;;
	*)
		is_kube "$1" || return 1
		echo "k8s.io/kubernetes k8s.io/kubernetes/cmd/$1 $KUBERNETES_VERSION 0"
		;;
	esac
}

# mod_info MODULE VERSION FIELD: a field (Dir, GoMod, Info, ...) of `go mod download -json`
# (downloads the module into GOMODCACHE the first time; offline after that).
mod_info() {
	local json
	json=$(cd "$CACHE" && go mod download -json "$1@$2") || die "go mod download $1@$2 failed: $json"
	sed -n "s/^[[:space:]]*\"$3\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$json" | head -n1
}

# The -ldflags a component's own release build sets (its version string; for Kubernetes what
# hack/lib/version.sh sets, with the module's publication time as the build date, and the
# release build's -s -w).
component_ldflags() {
	case "$1" in
	crictl) echo "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" ;;
	etcd) echo "" ;; # etcd's version is a constant of go.etcd.io/etcd/api/v3/version
	crio) crio_ldflags ;; # CRI-O: see its block below
	e2e.test) component_ldflags kube-apiserver ;; # the same version stamps as the control plane
	kubelet | kubelet-* | kubemark) component_ldflags kube-apiserver ;; # the same stamps, -s -w
	agnhost) agnhost_ldflags ;;                  # node conformance: see its block below
	nnp) echo "-w" ;;                            # test/images/image-util.sh's, as agnhost's
	# containerd: its Makefile's GO_LDFLAGS (Version, Package; no Revision without git).
	containerd2) echo "-X $CONTAINERD2_MODULE/version.Version=$CONTAINERD2_VERSION -X $CONTAINERD2_MODULE/version.Package=$CONTAINERD2_MODULE" ;;
	*)
		is_kube "$1" || return 0
		local v=$KUBERNETES_VERSION major minor date pkg flags="-s -w"
		major=${v#v}
		major=${major%%.*}
		minor=${v#v"$major".}
		minor=${minor%%.*}
		date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(mod_info k8s.io/kubernetes "$v" Info)")
		for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
			flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
			flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
		done
		echo "$flags"
		;;
	esac
}

# The build tags of a component's release build (hack/lib/golang.sh for Kubernetes).
component_tags() {
	# kubernetes: hack/lib/golang.sh gives its test binaries (e2e.test) the same tags.
	if is_kube "$1" || [[ $1 == e2e.test || $1 == kubelet* || $1 == kubemark ]]; then echo "selinux,notest,grpcnotrace"; fi
	if [[ $1 == crio ]]; then crio_tags; fi # CRI-O: see its block below
	# containerd: without the btrfs, devmapper and zfs snapshotters (the lab uses overlayfs;
	# btrfs needs cgo and libbtrfs headers).
	if [[ $1 == containerd2 ]]; then echo "no_btrfs,no_devmapper,no_zfs"; fi
	if [[ $1 == runc ]]; then echo "seccomp"; fi
	return 0
}

# ---- CRI-O -------------------------------------------------------------
# `crio` (cmd/crio) from module github.com/cri-o/cri-o, with cgo (libseccomp), and its C
# helper `pinns` (pinns/ of the same module zip, built with Debian's gcc and make) next to it
# in the cache: $CACHE/crio-$CRIO_VERSION/bin/{crio,pinns}. conmon and runc/crun come from
# Debian (tests/e2e/runtimes/crio.sh installs them).
crio_spec() { echo "github.com/cri-o/cri-o github.com/cri-o/cri-o/cmd/crio $CRIO_VERSION 1"; }

# CRI-O's Makefile picks BUILDTAGS by probing the build machine (hack/*_tag.sh); ours are
# fixed instead, so that every machine builds the same binary:
#   containers_image_openpgp           signatures verified in Go (no gpgme/libgpgme)
#   exclude_graphdriver_btrfs          no btrfs driver (no libbtrfs headers); overlay and vfs stay
#   exclude_graphdriver_devicemapper   no devicemapper driver (no libdevmapper)
#   btrfs_noversion                    what hack/btrfs_tag.sh says without btrfs/version.h
#   containers_image_ostree_stub       no ostree transport (no libostree), as upstream always sets
#   seccomp                            RuntimeDefault/Localhost seccomp profiles work as on a
#                                      real node; needs libseccomp-dev (Debian) for cgo
# Left out: selinux and apparmor (neither is enforcing here; their Go code is not needed) and
# libsubid (user-namespace id ranges from /etc/subuid, not used by picolet's tests).
crio_tags() {
	echo "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,btrfs_noversion,containers_image_ostree_stub,seccomp"
}

# What CRI-O's Makefile sets (BASE_LDFLAGS): -s -w, the build date (here the module's
# publication time, so that a rebuild is the same binary) and the commit (the proxy's Origin
# hash for the tag). The version itself is a constant (internal/version.Version).
crio_ldflags() {
	local info date commit pkg=github.com/cri-o/cri-o/internal/version
	info=$(mod_info github.com/cri-o/cri-o "$CRIO_VERSION" Info)
	date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
	commit=$(sed -n 's/.*"Hash":"\([^"]*\)".*/\1/p' "$info")
	echo "-s -w -X $pkg.buildDate=$date${commit:+ -X $pkg.buildCommit=$commit}"
}

# crio_list_refused: true. The proxy answers 403 for the module's version list
# (.../github.com/cri-o/cri-o/@v/list), which `go install pkg@version` reads for its
# deprecation check and then fails; a build module (build_module, `go get pkg@version`, then
# check_pins: the versions CRI-O's go.mod pins, none newer) does not read it.
crio_list_refused() { true; }

# crio_check: the C side of the build is there (before the long Go build, not after it).
crio_check() {
	{ command -v cc && command -v make; } >/dev/null ||
		die "crio: pinns needs Debian's gcc and make (apt-get install gcc make libc6-dev)"
	pkg-config --exists libseccomp 2>/dev/null ||
		die "crio: the seccomp build tag needs libseccomp-dev (apt-get install libseccomp-dev pkg-config)"
}

# crio_extras DIR: builds pinns into DIR/bin from the module's C source (make, as upstream's
# pinns/Makefile: a static binary), in a copy under DIR (the module cache is read-only).
crio_extras() {
	local dir=$1 src
	src=$(mod_info github.com/cri-o/cri-o "$CRIO_VERSION" Dir)
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	cp -r "$src/pinns" "$dir/src/pinns"
	chmod -R u+w "$dir/src"
	make -s -C "$dir/src/pinns" >&2 || die "crio: pinns build failed"
	install -m 0755 "$dir/src/bin/pinns" "$dir/bin/pinns"
	rm -rf "$dir/src"
}
# ---- end CRI-O ---------------------------------------------------------------------------

# ---- node conformance ------------------------------------------------------------
# e2e.test: the test binary of package k8s.io/kubernetes/test/e2e, as upstream's
# hack/lib/golang.sh makes it (`go test -c`, the release tags selinux,notest,grpcnotrace, the
# version stamps of hack/lib/version.sh with -s -w), in the control plane's build module (the
# same staging replaces). One difference: CGO_ENABLED=0 (upstream builds test binaries with the
# machine's cgo default; nothing in e2e.test needs cgo, and a static binary is the same on
# every machine).
# agnhost: the binary of the e2e test image registry.k8s.io/e2e-test-images/agnhost, from
# test/images/agnhost of the same module, as test/images/image-util.sh builds it
# (CGO_ENABLED=0, -ldflags "-w -X main.Version=<test/images/agnhost/VERSION>", no tags). The
# image around it is made by tests/conformance/images.sh.
# ginkgo: the Ginkgo CLI that runs e2e.test on parallel nodes (upstream's test targets build
# it from their vendor tree: here the version k8s.io/kubernetes's go.mod pins, in the same
# build module, its pins checked). No tags or version stamps (upstream sets none that matter).
# nnp: the binary of the e2e test image nonewprivs (test/images/nonewprivs: prints its
# effective uid; the image makes it setuid root), built the same way as agnhost.
conformance_spec() {
	case "$1" in
	e2e.test) echo "k8s.io/kubernetes k8s.io/kubernetes/test/e2e $KUBERNETES_VERSION 0" ;;
	agnhost) echo "k8s.io/kubernetes k8s.io/kubernetes/test/images/agnhost $KUBERNETES_VERSION 0" ;;
	nnp) echo "k8s.io/kubernetes k8s.io/kubernetes/test/images/nonewprivs $KUBERNETES_VERSION 0" ;;
	ginkgo) echo "k8s.io/kubernetes github.com/onsi/ginkgo/v2/ginkgo $KUBERNETES_VERSION 0" ;;
	esac
}

# agnhost's version, which its image is tagged with (test/utils/image/manifest.go names the same).
agnhost_version() {
	local dir
	dir=$(mod_info k8s.io/kubernetes "$KUBERNETES_VERSION" Dir)
	tr -d '[:space:]' <"$dir/test/images/agnhost/VERSION"
}

agnhost_ldflags() { echo "-w -X main.Version=$(agnhost_version)"; }
# ---- end node conformance ----------------------------------------------------------------------

# ---- the kubelet -------------------------------------------------------------------
# kubelet: k8s.io/kubernetes/cmd/kubelet at KUBERNETES_VERSION, as the release builds it
# (hack/lib/golang.sh: the release tags, the version stamps with -s -w). One difference: the
# kubelet is not in KUBE_STATIC_BINARIES, so upstream's amd64 release has cgo on; here
# CGO_ENABLED=0 as the control plane's (a cgo build recompiles every package the control
# plane's builds left in Go's cache, and the binary is the same code bar the resolver).
# kubelet-arm64, kubelet-armv7: the same package cross-built by Go (GOARCH=arm64; GOARCH=arm
# GOARM=7), CGO_ENABLED=0 (no C cross toolchain here): for their size only.
# kubemark: k8s.io/kubernetes/cmd/kubemark (hollow nodes: a real kubelet's code on a fake
# runtime), static as in KUBE_STATIC_BINARIES. All in the control plane's build module.
kubelet_spec() {
	case "$1" in
	kubelet) echo "k8s.io/kubernetes k8s.io/kubernetes/cmd/kubelet $KUBERNETES_VERSION 0" ;;
	kubelet-arm64 | kubelet-armv7) echo "k8s.io/kubernetes k8s.io/kubernetes/cmd/kubelet $KUBERNETES_VERSION 0" ;;
	kubemark) echo "k8s.io/kubernetes k8s.io/kubernetes/cmd/kubemark $KUBERNETES_VERSION 0" ;;
	esac
}

# component_goenv NAME: the target's GOARCH (and GOARM) for a cross build, empty for native.
component_goenv() {
	case "$1" in
	kubelet-arm64) echo "GOARCH=arm64" ;;
	kubelet-armv7) echo "GOARCH=arm GOARM=7" ;;
	esac
}
# ---- end the kubelet ---------------------------------------------------------------------------

# ---- device plugins ---------------------------------------------------------------
# sample-device-plugin: k8s.io/kubernetes/test/images/sample-device-plugin at KUBERNETES_VERSION
# (the e2e tests' plugin: resource example.com/resource, devices Dev-1 and Dev-2, Allocate
# mounts /tmp/<id>), static (CGO_ENABLED=0), in the control plane's build module.
# generic-device-plugin: github.com/squat/generic-device-plugin (device nodes by path glob,
# e.g. serial and USB devices) at GENERIC_DEVICE_PLUGIN_VERSION, static. It stands in for
# smarter-device-manager, which the Go module proxy does not serve (see versions.sh).
device_plugin_spec() {
	case "$1" in
	sample-device-plugin) echo "k8s.io/kubernetes k8s.io/kubernetes/test/images/sample-device-plugin $KUBERNETES_VERSION 0" ;;
	generic-device-plugin) echo "github.com/squat/generic-device-plugin github.com/squat/generic-device-plugin $GENERIC_DEVICE_PLUGIN_VERSION 0" ;;
	esac
}
# ---- end device plugins ------------------------------------------------------------------------

# local_replaces GOMOD → "module required-version" per line, for each replace directive of
# that go.mod whose target is a directory (=> ./x or ../x) and whose module it requires. Such
# a go.mod is one `go install pkg@version` refuses, and whose requirements may be placeholders
# (Kubernetes requires its staging modules at v0.0.0).
local_replaces() {
	awk '
	function strip(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]*(\/\/.*)?$/, "", s); return s }
	/^require[ \t]*\(/ { blk = "require"; next }
	/^replace[ \t]*\(/ { blk = "replace"; next }
	blk != "" && /^\)/ { blk = ""; next }
	{
		kind = blk; line = $0
		if (kind == "" && line ~ /^(require|replace)[ \t]/) { kind = $1; sub(/^[a-z]+/, "", line) }
		if (kind == "") next
		n = split(strip(line), f, /[ \t]+/)
		if (kind == "require" && n >= 2) req[f[1]] = f[2]
		if (kind == "replace") {
			for (i = 1; i < n; i++) if (f[i] == "=>" && f[i + 1] ~ /^\.\.?\//) loc[f[1]] = 1
		}
	}
	END { for (m in loc) if (m in req) print m, req[m] }
	' "$1" | sort
}

# published_version MODULE VERSION DEP: the published version of DEP, a module MODULE@VERSION
# requires at a placeholder and takes from its own tree. Kubernetes vX.Y.Z's staging modules
# are published as vX-1.Y.Z, i.e. v0.Y.Z.
published_version() {
	case "$1" in
	k8s.io/kubernetes) echo "v0.${2#v1.}" ;;
	*) return 1 ;;
	esac
}

# build_module MODULE VERSION → prints a directory holding a Go module, under the cache, that
# requires MODULE@VERSION and replaces each module MODULE takes from its own tree with its
# published version (when MODULE requires it at v0.0.0). Builds there use MODULE's go.sum-
# checked dependencies at MODULE's versions (minimal version selection keeps them).
build_module() {
	local module=$1 version=$2 gomod bdir dep req pub replaces=""
	gomod=$(mod_info "$module" "$version" GoMod)
	[[ -f $gomod ]] || die "$module@$version: no go.mod from the proxy"
	bdir="$CACHE/.gomod/${module//\//_}@$version"
	mkdir -p "$bdir"
	while read -r dep req; do
		[[ -n $dep ]] || continue
		[[ $req == v0.0.0 ]] || continue # a real requirement: MVS takes it as it is
		pub=$(published_version "$module" "$version" "$dep") ||
			die "$module@$version requires $dep at $req from its own tree; no published version known"
		replaces+=$'\t'"$dep => $dep $pub"$'\n'
	done < <(local_replaces "$gomod")
	{
		echo "// Generated by picolet's tests/upstream/build.sh: builds $module $version as a dependency."
		echo "module picolet.invalid/upstream-build"
		echo
		# The same language version and GODEBUG defaults as the module's own builds.
		grep -E '^go [0-9]' "$gomod"
		awk '/^godebug[ \t]*\(/ { b = 1 } b || /^godebug[ \t]/ { print } b && /^\)/ { b = 0 }' "$gomod"
		echo
		echo "require $module $version"
		if [[ -n $replaces ]]; then
			echo
			echo "replace ("
			printf '%s' "$replaces"
			echo ")"
		fi
	} >"$bdir/go.mod.new"
	# Keep go.mod and go.sum from an earlier build when nothing changed.
	if ! cmp -s "$bdir/go.mod.new" "$bdir/go.mod.in" 2>/dev/null; then
		mv "$bdir/go.mod.new" "$bdir/go.mod.in"
		cp "$bdir/go.mod.in" "$bdir/go.mod"
		rm -f "$bdir/go.sum"
	else
		rm -f "$bdir/go.mod.new"
	fi
	echo "$bdir"
}

# check_pins GOMOD: in the build module (the current directory), each module GOMOD requires
# (placeholders aside) is selected at exactly that version: the build uses the dependency
# versions upstream pins, none newer.
check_pins() {
	local diff
	diff=$(go list -m all | awk '
		NR == FNR { if ($2 ~ /^v/) sel[$1] = $2; next }
		/^(require[ \t]+|\t)[^ \t]+ v[0-9]/ {
			m = $1; v = $2; if (m == "require") { m = $2; v = $3 }
			if (v != "v0.0.0" && (m in sel) && sel[m] != v) print m, "pinned", v, "selected", sel[m]
		}' - "$1")
	[[ -z $diff ]] || die "the build module does not select what $1 pins:"$'\n'"$diff"
}

# compile NAME PKG VERSION CGO TAGS LDFLAGS DEST MODULE: go install pkg@version when the module
# allows it, else a build module that requires it.
compile() {
	local name=$1 pkg=$2 version=$3 cgo=$4 tags=$5 ldflags=$6 dest=$7 module=$8 gomod bdir p
	gomod=$(mod_info "$module" "$version" GoMod)
	# CRI-O: not by go install, see crio_list_refused in its block.
	if [[ -z "$(local_replaces "$gomod")" ]] && ! grep -qE '^replace[[:space:]]' "$gomod" &&
		! { [[ $name == crio ]] && crio_list_refused; }; then
		# go install pkg@version: the module's own go.mod and go.sum, outside any module of ours.
		# PKG may be a comma-separated list of packages of one module (containerd2).
		local at=()
		for p in ${pkg//,/ }; do at+=("$p@$version"); done
		(cd "$dest" && GOBIN="$dest/bin" CGO_ENABLED=$cgo go install -tags "$tags" -ldflags "$ldflags" "${at[@]}")
		return
	fi
	[[ $pkg != *,* ]] || die "$name: several packages need a module without replace directives"
	bdir=$(build_module "$module" "$version")
	say "$name $version: building in $bdir (a build module: see compile)"
	(
		cd "$bdir"
		if [[ $name == ginkgo ]]; then
			# Not a package of MODULE: the version MODULE pins (node conformance block).
			local gv
			gv=$(awk '$1 == "github.com/onsi/ginkgo/v2" { print $2; exit }' "$gomod")
			[[ -n $gv ]] || die "$module@$version pins no github.com/onsi/ginkgo/v2"
			go get "$pkg@$gv"
			check_pins "$gomod"
			CGO_ENABLED=$cgo go build -tags "$tags" -ldflags "$ldflags" -o "$dest/bin/$name" "$pkg"
			return
		fi
		if [[ $name == e2e.test ]]; then
			# A test binary (node conformance block): the package's test dependencies too.
			go get -t "$pkg@$version"
			check_pins "$gomod"
			CGO_ENABLED=$cgo go test -c -tags "$tags" -ldflags "$ldflags" -o "$dest/bin/$name" "$pkg"
			return
		fi
		go get "$pkg@$version"
		check_pins "$gomod"
		local goenv=() out=$dest/bin/$name
		# The kubelet's cross builds (its block): GOARCH/GOARM, the binary named kubelet.
		read -ra goenv <<<"$(component_goenv "$name")"
		[[ $name != kubelet-* ]] || out=$dest/bin/kubelet
		env "${goenv[@]}" CGO_ENABLED="$cgo" go build -tags "$tags" -ldflags "$ldflags" -o "$out" "$pkg"
	)
}

# build NAME: prints the binary's path on stdout.
build() {
	local name=$1 spec module pkg version cgo dir bin stamp want start secs ldflags tags b out timer=()
	spec=$(component_spec "$name") || die "unknown component '$name' (known: ${COMPONENTS[*]})"
	read -r module pkg version cgo <<<"$spec"
	dir="$CACHE/$name-$version"
	out=$(component_output "$name" "$dir")
	# The last of the component's binaries: present only when all are (one `go install`).
	for b in $(component_bins "$name"); do bin="$dir/bin/$b"; done
	stamp="$dir/built"
	ldflags=$(component_ldflags "$name")
	tags=$(component_tags "$name")
	local goenv=()
	read -ra goenv <<<"$(component_goenv "$name")"
	want="$pkg@$version $(go env GOVERSION) $(go env GOOS)/$(env "${goenv[@]}" go env GOARCH)${goenv[*]:+ ${goenv[*]}} cgo=$cgo${tags:+ tags=$tags} ldflags=$ldflags"
	if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		say "$name $version: cached ($out)"
		echo "$out"
		return 0
	fi
	say "$name $version: building $pkg@$version (module $module)"
	start=$(date +%s)
	rm -rf "$dir"
	mkdir -p "$dir/bin"
	# GNU time, where present, records the largest process's peak memory (compiler or linker).
	[[ -x /usr/bin/time ]] && timer=(/usr/bin/time -o "$dir/build-maxrss-kib" -f '%M')
	if [[ $name == crio ]]; then crio_check; fi # CRI-O: see its block
	"${timer[@]}" "$SCRIPT_DIR/build.sh" --compile "$name" "$pkg" "$version" "$cgo" "$tags" "$ldflags" "$dir" "$module" ||
		die "$name $version: build of $pkg@$version failed"
	for b in $(component_bins "$name"); do
		[[ -x "$dir/bin/$b" ]] || die "$name $version: built, but no $dir/bin/$b"
	done
	if [[ $name == crio ]]; then crio_extras "$dir"; fi # CRI-O: pinns, see its block
	secs=$(($(date +%s) - start))
	echo "$want" >"$stamp"
	echo "$secs" >"$dir/build-seconds"
	say "$name $version: built in $secs s ($bin, $(du -h "$bin" | cut -f1)$([[ -f $dir/build-maxrss-kib ]] && echo ", peak RSS $(($(cat "$dir/build-maxrss-kib") / 1024)) MiB"))"
	echo "$out"
}

list() {
	local name spec module pkg version cgo state
	for name in "${COMPONENTS[@]}"; do
		spec=$(component_spec "$name")
		read -r module pkg version cgo <<<"$spec"
		state="not built"
		if [[ -f "$CACHE/$name-$version/built" ]]; then
			state="cached"
			[[ -f "$CACHE/$name-$version/build-seconds" ]] && state+=" (built in $(cat "$CACHE/$name-$version/build-seconds") s)"
		fi
		printf '%-24s %-9s %-26s %s\n' "$name" "$version" "$module" "$state"
	done
}

only_path=0
case "${1:-}" in
--list) list; exit 0 ;;
--path) only_path=1; shift ;;
--compile) shift; compile "$@"; exit 0 ;; # internal: one build, under /usr/bin/time
"" | -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
esac
mkdir -p "$CACHE"
[[ $only_path == 1 ]] || say "$(go version); cache $CACHE"
for c in "$@"; do
	build "$c"
done
