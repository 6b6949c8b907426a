#!/usr/bin/env bash
# Builds the upstream components picolet is tested against, from their published Go modules
# at pinned versions (the Go module proxy is the only source), into a cache outside the work
# tree. A second run builds nothing.
#
#   tests/upstream/build.sh [--path] COMPONENT...     build (or find) each; --path prints only
#                                                      each binary's path, one per line
#   tests/upstream/build.sh --list                     components, versions, cached or not
#
# Components: see versions.sh (crictl today; the control plane, the kubelet, e2e.test,
# containerd 2.x and CRI-O join it with their issues).
#
# Cache: $PICOLET_UPSTREAM_CACHE (default ~/.cache/picolet/upstream)/<component>-<version>/.
# Go's own caches stay where Go keeps them (GOMODCACHE ~/go/pkg/mod, GOCACHE ~/.cache/go-build),
# never under the checkout. GOTOOLCHAIN defaults to `local` so that a module asking for a newer
# Go fails loudly instead of fetching one behind our back (set PICOLET_GOTOOLCHAIN to allow it).
# Never part of picolet: these binaries are test peers only.
set -euo pipefail

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
# Go's caches must not land in a checkout (a clean tree stays clean).
for v in GOMODCACHE GOCACHE; do
	d=$(go env "$v")
	case "$d" in
	"$(cd "$SCRIPT_DIR/../.." && pwd)"/*) die "$v=$d is inside the checkout; point it elsewhere" ;;
	esac
done

# component_spec NAME → "module package version cgo" (one line) or fails.
component_spec() {
	case "$1" in
	crictl) echo "sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl $CRICTL_VERSION 0" ;;
	*) return 1 ;;
	esac
}

# The -ldflags a component's own release build sets (its version string).
component_ldflags() {
	case "$1" in
	crictl) echo "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" ;;
	esac
}
COMPONENTS=(crictl)

# build NAME: prints the binary's path on stdout.
build() {
	local name=$1 spec module pkg version cgo dir bin stamp want start ldflags
	spec=$(component_spec "$name") || die "unknown component '$name' (known: ${COMPONENTS[*]})"
	read -r module pkg version cgo <<<"$spec"
	dir="$CACHE/$name-$version"
	bin="$dir/bin/$name"
	stamp="$dir/built"
	ldflags=$(component_ldflags "$name")
	want="$pkg@$version $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH) cgo=$cgo ldflags=$ldflags"
	if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		say "$name $version: cached ($bin)"
		echo "$bin"
		return 0
	fi
	say "$name $version: go install $pkg@$version (module $module)"
	start=$(date +%s)
	rm -rf "$dir"
	mkdir -p "$dir/bin"
	# go install pkg@version: the module's own go.mod and go.sum, outside any module of ours.
	(cd "$dir" && GOBIN="$dir/bin" CGO_ENABLED=$cgo go install -ldflags "$ldflags" "$pkg@$version") ||
		die "$name $version: go install $pkg@$version failed"
	[[ -x "$bin" ]] || die "$name $version: built, but no $bin"
	echo "$want" >"$stamp"
	say "$name $version: built in $(($(date +%s) - start)) s ($bin, $(du -h "$bin" | cut -f1))"
	echo "$bin"
}

list() {
	local name spec module pkg version cgo state
	for name in "${COMPONENTS[@]}"; do
		spec=$(component_spec "$name")
		read -r module pkg version cgo <<<"$spec"
		state="not built"
		[[ -x "$CACHE/$name-$version/bin/$name" ]] && state="cached"
		printf '%-10s %-10s %-40s %s\n' "$name" "$version" "$module" "$state"
	done
}

only_path=0
case "${1:-}" in
--list) list; exit 0 ;;
--path) only_path=1; shift ;;
"" | -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
esac
[[ $only_path == 1 ]] || say "$(go version); cache $CACHE"
for c in "$@"; do
	build "$c"
done
