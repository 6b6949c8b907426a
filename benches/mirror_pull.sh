#!/usr/bin/env bash
# Pull time through picolet's image mirror against the runtime's own import.
#
#   sudo benches/mirror_pull.sh [--runtime containerd] [--runs 3] [--sizes "5 100"] PICOLET_BIN
#
# One lab (tests/e2e/lab.sh: /tmp/picolet-mp, bridge picomp, subnet 10.88.144.0/24; the
# runtime pulls through 127.0.0.1:17144), picolet running with the mirror and no pods. For
# each size (MB of random bytes in the layer, besides busybox): an OCI archive made by
# tests/e2e/mkimage.py, then RUNS times each, the image removed from the runtime before:
#   import: `ctr images import` of the archive (containerd) / `skopeo copy oci-archive:`
#           into CRI-O's storage (crio) — the runtime reading the archive itself;
#   mirror: CRI PullImage (crictl pull) of docker.io/library/mp-N:1 with the archive in
#           picolet's directory — the runtime pulling it through picolet.
# Prints one line per size and way: the median of the runs, the runs, picolet's RSS after.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=containerd runs=3 sizes="5 100"
while (($#)); do
	case "$1" in
	--runtime) runtime=$2; shift ;;
	--runs) runs=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "mirror_pull.sh: unknown argument $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
(($# == 1)) || { echo "mirror_pull.sh: needs PICOLET_BIN (--help)" >&2; exit 2; }
BIN=$(realpath "$1")
[[ $EUID -eq 0 ]] || { echo "mirror_pull.sh: needs root (the lab)" >&2; exit 1; }
log() { printf 'mirror_pull.sh: %s\n' "$*" >&2; }
crictl=$(tests/upstream/build.sh --path crictl)

LAB=/tmp/picolet-mp
WORK=$(mktemp -d /tmp/picolet-mp-work.XXXXXX)
PID=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	[[ -z $PID ]] || { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	tests/e2e/lab.sh down "$LAB" >/dev/null 2>&1 || log "lab.sh down $LAB failed"
	rm -rf "$WORK"
}
trap cleanup EXIT

EP=$(PICOLET_LAB_RUNTIME=$runtime PICOLET_LAB_BRIDGE=picomp PICOLET_LAB_SUBNET=10.88.144.0/24 \
	tests/e2e/lab.sh up "$LAB" 2>"$WORK/lab.log" | tail -n 1) || { cat "$WORK/lab.log" >&2; exit 1; }
MIRROR=$(sed -n 's/^MIRROR=//p' "$LAB/lab.env")
mkdir -p "$WORK/manifests" "$WORK/images"
RUST_LOG=info "$BIN" run --pod-manifest-path "$WORK/manifests" --container-runtime-endpoint "$EP" \
	--root-dir "$WORK/root" --pod-log-dir "$WORK/logs" --port 0 --cgroup-root picolet-smoke-picomp \
	--image-mirror-address "$MIRROR" --image-archive-dir "$WORK/images" 2>"$WORK/picolet.log" &
PID=$!

cri() { "$crictl" --runtime-endpoint "$EP" --image-endpoint "$EP" --timeout 600s "$@"; }
now() { printf '%s' "${EPOCHREALTIME/,/.}"; }
median() { tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$PID/status"; }

# The runtime's own import (lab.sh: ctr images import; skopeo copy for CRI-O).
import() { tests/e2e/lab.sh image-import "$1" "$LAB" >/dev/null 2>&1; }

for mb in $sizes; do
	name=docker.io/library/mp-$mb:1
	head -c $((mb * 1024 * 1024)) /dev/urandom >"$WORK/blob"
	python3 tests/e2e/mkimage.py --name "$name" --add "$WORK/blob:/blob" -o "$WORK/mp-$mb.tar" 2>/dev/null
	size=$(stat -c %s "$WORK/mp-$mb.tar")
	for way in import mirror; do
		times=()
		for ((r = 0; r < runs; r++)); do
			cri rmi "$name" >/dev/null 2>&1 || true
			rm -f "$WORK/images/mp-$mb.tar"
			if [[ $way == mirror ]]; then
				cp "$WORK/mp-$mb.tar" "$WORK/images/.mp.tmp" && mv "$WORK/images/.mp.tmp" "$WORK/images/mp-$mb.tar"
				# Wait until picolet has read it (its log line), so the pull alone is timed.
				for ((i = 0; i < 100; i++)); do
					grep -q "mp-$mb.tar: $name" "$WORK/picolet.log" && break
					sleep 0.1
				done
				t0=$(now)
				cri pull "$name" >/dev/null 2>&1 || { log "crictl pull $name failed"; exit 1; }
			else
				t0=$(now)
				import "$WORK/mp-$mb.tar"
			fi
			t1=$(now)
			times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")
		done
		printf '%-8s %4d MB archive (%d B) %-6s median %s s  runs %s  picolet RSS %s KiB\n' \
			"$runtime" "$mb" "$size" "$way" "$(echo "${times[*]}" | median)" "${times[*]}" "$(rss_kib)"
	done
	cri rmi "$name" >/dev/null 2>&1 || true
done
