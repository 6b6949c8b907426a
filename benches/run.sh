#!/usr/bin/env bash
# picolet's benchmarks, all of them, one table at the end.
#
#   benches/run.sh [--quick] [--no-arm] [--no-containerd] [--no-podman] [--no-callgrind]
#   benches/run.sh --table-only      print the table of the last run again
#
#   footprint  stripped release binary sizes (x86_64 here; aarch64/armv7/armv6 through
#              packaging/build-all.sh), RSS of `picolet run` at 0/10/100/500 pods (fake CRI)
#              and at 10 pods (real containerd), RSS per pod
#   idle       CPU seconds, bytes written, CRI calls of picolet with 50 pods and nothing
#              changing: 600 s (--quick: 60 s); instructions/s under callgrind
#   latency    manifest written → RunPodSandbox (fake CRI, p50/p99); pod start on containerd:
#              picolet vs a raw CRI client vs `podman kube play`, 1 and 20 pods
#   scale      100 and 500 pods, fake CRI with containerd-like per-call latency: start,
#              mass edit, delete all
#
# Needs root for the containerd part (tests/e2e/lab.sh: a private containerd under
# $CARGO_TARGET_DIR/bench-lab/, bridge picobench0, subnet 10.77.79.0/24) and podman (installed with catatonit
# when missing). Everything it starts is removed on exit, also on failure or Ctrl-C.
# --quick: shorter windows and fewer repetitions, no ARM builds, no callgrind (~11 min).
# Full run: ~35 min on 2 cores, plus ~15 min of ARM builds on a cold cache.
#
# Output: $CARGO_TARGET_DIR/bench/ (default target/bench/): results.tsv (one figure a line
# with the load average when it was taken), table.md (what is printed at the end), logs/.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=never
OUT=$CARGO_TARGET_DIR/bench
RESULTS=$OUT/results.tsv
LAB_DIR=$CARGO_TARGET_DIR/bench-lab
export PICOLET_LAB_BRIDGE=${PICOLET_LAB_BRIDGE:-picobench0}
export PICOLET_LAB_SUBNET=${PICOLET_LAB_SUBNET:-10.77.79.0/24}

quick=0 arm=1 ctrd=1 podman=1 callgrind=1 table_only=0
while (($#)); do
	case "$1" in
	--table-only) table_only=1 ;;
	--quick) quick=1 arm=0 callgrind=0 ;;
	--no-arm) arm=0 ;;
	--no-containerd) ctrd=0 ;;
	--no-podman) podman=0 ;;
	--no-callgrind) callgrind=0 ;;
	-h | --help)
		sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done

if ((quick)); then
	IDLE_SECS=60 LAT_ISOLATED=50 LAT_EDITS=10 LAT_BURST=100 REPS=3 CTRD_IDLE=20
else
	IDLE_SECS=600 LAT_ISOLATED=200 LAT_EDITS=40 LAT_BURST=200 REPS=5 CTRD_IDLE=120
fi

log() { printf '\nbench: %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The table: one markdown table per section (in order of first appearance), each figure
# with the load average at the start of the measurement that produced it.
print_table() {
	{
		echo "### Machine"
		echo
		cat "$OUT/machine.md"
		echo "- load average at end: $(load)"
		awk -F'\t' -f benches/table.awk "$RESULTS"
	} >"$OUT/table.md"
	echo
	cat "$OUT/table.md"
}

if ((table_only)); then
	print_table
	exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/bin"
: >"$RESULTS"
# The bench's temporary directories (fake CRI sockets, manifests, podman storage).
TMPDIR=$(mktemp -d /tmp/picolet-bench-run.XXXXXX)
export TMPDIR
lab_started=0

cleanup() {
	local rc=$? d
	set +e
	# A podman left behind by a killed bench: its pods, network and storage.
	for d in "$TMPDIR"/pm.*; do
		[[ -d "$d" ]] || continue
		local pm=(podman --root "$d/root" --runroot "$d/run" --network-config-dir "$d/net"
			--cgroup-manager cgroupfs --events-backend file)
		CONTAINERS_CONF=$d/containers.conf "${pm[@]}" pod rm -a -f -t 0 >/dev/null 2>&1
		CONTAINERS_CONF=$d/containers.conf "${pm[@]}" network rm -f podman-default-kube-network >/dev/null 2>&1
		CONTAINERS_CONF=$d/containers.conf "${pm[@]}" system reset -f >/dev/null 2>&1
		rm -rf /var/lib/cni/networks/podman-default-kube-network
	done
	if ((lab_started)); then
		tests/e2e/lab.sh down "$LAB_DIR" >>"$OUT/logs/lab.log" 2>&1 || log "lab down failed: see $OUT/logs/lab.log"
	fi
	rm -rf "$TMPDIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# add <section> <metric> <value> [note]: one figure, stamped with the current load.
add() {
	printf 'RESULT\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" "$(load)" >>"$RESULTS"
}

# bench <log name> <mode> [args…]: runs the bench binary, keeps its RESULT lines with the
# load average at the start of the mode.
bench() {
	local name=$1 l
	shift
	l=$(load)
	log "$* (load $l)"
	if ! "$BENCH" "$@" --picolet "$OUT/bin/picolet" 2> >(tee "$OUT/logs/$name.log" >&2) |
		awk -v l="$l" -F'\t' '$1 == "RESULT" { print $0 "\t" l; fflush() }' >>"$RESULTS"; then
		add errors "$name" "FAILED" "see $OUT/logs/$name.log"
	fi
}

# --- machine ---------------------------------------------------------------------------
{
	echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
	echo "- memory: $(free -h | awk '/^Mem:/ { print $2 " total, " $7 " available" }')"
	echo "- kernel: $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "- cgroups: $(stat -fc %T /sys/fs/cgroup | sed 's/tmpfs/v1 (tmpfs)/; s/cgroup2fs/v2/'); PID 1: $(ps -p 1 -o comm=)"
	echo "- rustc: $(rustc --version)"
	echo "- load average at start: $(load)"
	echo "- mode: $( ((quick)) && echo quick || echo full)"
} >"$OUT/machine.md"
cat "$OUT/machine.md" >&2

# --- build -----------------------------------------------------------------------------
log "cargo build --release (default features, then --no-default-features)"
nice -n 10 cargo build --locked --release 2>&1 | tail -n 2 >&2
cp "$CARGO_TARGET_DIR/release/picolet" "$OUT/bin/picolet"
nice -n 10 cargo build --locked --release --no-default-features 2>&1 | tail -n 2 >&2
cp "$CARGO_TARGET_DIR/release/picolet" "$OUT/bin/picolet-static-only"
for v in picolet picolet-static-only; do
	f=$OUT/bin/$v
	desc=$(file -b "$f" | grep -o 'stripped\|not stripped' | head -1)
	label="x86_64-unknown-linux-gnu, full (default features)"
	[[ $v == picolet ]] || label="x86_64-unknown-linux-gnu, static-pods-only (--no-default-features)"
	add footprint "binary size: $label" "$(awk -v b="$(stat -c %s "$f")" 'BEGIN { printf "%.2f MiB", b / 1048576 }')" "$(stat -c %s "$f") bytes, $desc, dynamically linked to glibc"
done

if ((arm)); then
	log "ARM builds: packaging/build-all.sh --no-install --static-only-targets all"
	if PICOLET_DIST=$OUT/dist nice -n 10 packaging/build-all.sh --no-install --static-only-targets all \
		>"$OUT/logs/build-all.log" 2>&1; then :; else
		log "build-all.sh failed (toolchains missing? run packaging/build-all.sh once without --no-install): $OUT/logs/build-all.log"
	fi
	for t in aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf arm-unknown-linux-musleabihf; do
		for v in "" -static; do
			f=$OUT/dist/picolet-$t$v
			label="$t, $([[ -z $v ]] && echo full || echo static-pods-only)"
			if [[ -f "$f" ]]; then
				add footprint "binary size: $label" "$(awk -v b="$(stat -c %s "$f")" 'BEGIN { printf "%.2f MiB", b / 1048576 }')" "$(stat -c %s "$f") bytes, static musl, stripped"
			else
				add footprint "binary size: $label" "n/a" "not built: see $OUT/logs/build-all.log"
			fi
		done
	done
else
	add footprint "binary size: aarch64, armv7, armv6" "skipped" "--quick/--no-arm; packaging/build-all.sh builds them"
fi
# What a user would install instead, as far as it is installed here.
for b in podman conmon containerd containerd-shim-runc-v2 runc; do
	p=$(command -v "$b" || true)
	[[ -n "$p" ]] || continue
	add footprint "binary size of the alternative: $b" "$(awk -v b="$(stat -L -c %s "$p")" 'BEGIN { printf "%.1f MiB", b / 1048576 }')" "$p ($(dpkg -S "$(readlink -f "$p")" 2>/dev/null | cut -d: -f1 | head -1) $(dpkg-query -W -f='${Version}' "$(dpkg -S "$(readlink -f "$p")" 2>/dev/null | cut -d: -f1 | head -1)" 2>/dev/null))"
done

log "cargo bench --features fake-cri --bench picolet --no-run"
BENCH=$(nice -n 10 cargo bench --locked --features fake-cri --bench picolet --no-run 2>&1 |
	tee "$OUT/logs/bench-build.log" | sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -n 1)
[[ -x "$BENCH" ]] || {
	cat "$OUT/logs/bench-build.log" >&2
	exit 1
}

# --- fake CRI --------------------------------------------------------------------------
bench fake-rss fake-rss --counts 0,10,100,500
bench fake-idle fake-idle --pods 50 --secs "$IDLE_SECS"
if ((callgrind)) && command -v valgrind >/dev/null; then
	# Same code as the release binary, with symbols for the function breakdown.
	log "release build with symbols for callgrind"
	CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
		nice -n 10 cargo build --locked --release --target-dir "$CARGO_TARGET_DIR/symbols" 2>&1 | tail -n 1 >&2
	cp "$CARGO_TARGET_DIR/symbols/release/picolet" "$OUT/bin/picolet-symbols"
	l=$(load)
	log "fake-idle under callgrind (load $l)"
	if ! "$BENCH" fake-idle --pods 50 --secs 60 --callgrind --keep-dir "$OUT" \
		--picolet "$OUT/bin/picolet-symbols" 2>"$OUT/logs/fake-idle-callgrind.log" |
		awk -v l="$l" -F'\t' '$1 == "RESULT" { print $0 "\t" l }' >>"$RESULTS"; then
		add errors fake-idle-callgrind FAILED "see $OUT/logs/fake-idle-callgrind.log"
	fi
fi
bench fake-latency fake-latency --isolated "$LAT_ISOLATED" --edits "$LAT_EDITS" --burst "$LAT_BURST"
bench fake-scale fake-scale --counts 100,500

# --- containerd ------------------------------------------------------------------------
if ((ctrd)); then
	if [[ $EUID -ne 0 ]]; then
		add "pod start (containerd)" "all containerd figures" "skipped" "needs root (tests/e2e/lab.sh)"
	else
		pm_args=()
		if ((podman)); then
			missing=()
			command -v podman >/dev/null || missing+=(podman)
			command -v catatonit >/dev/null || [[ -x /usr/libexec/podman/catatonit ]] || missing+=(catatonit)
			if ((${#missing[@]})); then
				log "apt-get install ${missing[*]}"
				DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
					>"$OUT/logs/apt.log" 2>&1 || log "could not install ${missing[*]}: $OUT/logs/apt.log"
			fi
		fi
		lab_started=1
		log "lab up ($LAB_DIR)"
		endpoint=$(tests/e2e/lab.sh up "$LAB_DIR" 2>"$OUT/logs/lab.log" | tail -n 1)
		if ((podman)) && command -v podman >/dev/null; then
			pm_args=(--podman --image-tar "$LAB_DIR/images/busybox.tar")
		fi
		bench containerd containerd --endpoint "$endpoint" --counts 1,20 --reps "$REPS" \
			--rss-pods 10 --idle-secs "$CTRD_IDLE" --containerd-pid "$(cat "$LAB_DIR/runtime.pid")" \
			"${pm_args[@]}"
	fi
fi

print_table
log "results: $OUT/table.md, $RESULTS; logs: $OUT/logs"
