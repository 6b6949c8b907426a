#!/usr/bin/env bash
# How soon picolet syncs a container's exit after the runtime's event (the evented PLEG):
# on each runtime of the lab that streams CRI container events.
#
#   sudo benches/exit_latency.sh [--runtimes "containerd2 crio"] [--pods 10]
#
# For each runtime: a lab (tests/e2e/lab.sh, its own directory, bridge picoexit<i>, subnet
# 10.88.12<i>.0/24), picolet at RUST_LOG=debug with N static pods whose container exits with
# code 3 after 5+i seconds (restartPolicy Never), then from picolet's log, per pod:
#   event delay = the time picolet logged the Stopped event − the runtime's own stamp in it;
#   exit → sync = the pod worker's "starting Sync" after the first Stopped event − that stamp;
#   exit → status = the "pod status: … Terminated" line − the runtime's stamp (after the sync
#   has stopped the sandbox: that includes the runtime's StopPodSandbox).
# Prints min / median / max of each. Log timestamps are milliseconds: figures, not asserts.
set -euo pipefail
cd "$(dirname "$0")/.."
runtimes="containerd2 crio"
pods=10
while (($#)); do
	case "$1" in
	--runtimes) runtimes=$2; shift ;;
	--pods) pods=$2; shift ;;
	-h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "exit_latency.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[[ $EUID -eq 0 ]] || { echo "exit_latency.sh: needs root (the lab)" >&2; exit 1; }
cargo build --locked --release 2>&1 | tail -n 1 >&2
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/picolet

LAB='' PID='' WORK=''
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	[[ -z $PID ]] || { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	[[ -z $LAB ]] || tests/e2e/lab.sh down "$LAB" >/dev/null 2>&1 || echo "exit_latency.sh: lab.sh down $LAB failed" >&2
	PID='' LAB=''
}
trap cleanup EXIT

i=0
for rt in $runtimes; do
	i=$((i + 1))
	LAB=/tmp/picolet-exit-lab-$rt
	WORK=$(mktemp -d /tmp/picolet-exit.XXXXXX)
	mkdir -p "$WORK/manifests"
	endpoint=$(PICOLET_LAB_RUNTIME=$rt PICOLET_LAB_BRIDGE=picoexit$i PICOLET_LAB_SUBNET=10.88.12$i.0/24 \
		tests/e2e/lab.sh up "$LAB" 2>"$WORK/lab.log" | tail -n 1)
	RUST_LOG=debug "$BIN" run --pod-manifest-path "$WORK/manifests" --container-runtime-endpoint "$endpoint" \
		--root-dir "$WORK/root" --pod-log-dir "$WORK/logs" --hostname-override exit-node \
		--cgroup-root "/picolet-e2e-picoexit$i" --port 0 2>"$WORK/picolet.log" &
	PID=$!
	for ((p = 0; p < pods; p++)); do
		cat >"$WORK/manifests/.x$p.yaml" <<EOM
apiVersion: v1
kind: Pod
metadata: {name: exit$p, namespace: exit-bench}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: localhost/busybox:edge
    command: [sh, -c, "sleep $((5 + p)); exit 3"]
EOM
		mv "$WORK/manifests/.x$p.yaml" "$WORK/manifests/x$p.yaml"
	done
	# Wait (generously) until every pod's status says Terminated.
	for ((t = 0; t < 600; t++)); do
		n=$(grep -c 'pod status: exit-bench/exit[0-9]*-exit-node .*Terminated' "$WORK/picolet.log" || true)
		((n >= pods)) && break
		sleep 1
	done
	kill "$PID"; wait "$PID" 2>/dev/null || true; PID=''
	echo "== $rt ($(grep -m1 -o "watching the runtime's stream.*" "$WORK/picolet.log" || echo 'NOT WATCHING THE STREAM'))"
	python3 - "$WORK/picolet.log" <<'PY'
import re, sys, datetime, statistics
def t(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
stamp, delay, first_status, waiting, sync = {}, [], {}, {}, []
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) DEBUG pod_workers: pod worker (\S+): starting Sync", line)
    if m and m.group(2) in waiting:
        sync.append((t(m.group(1)) - waiting.pop(m.group(2))) * 1000)
        continue
    m = re.match(r"(\S+) DEBUG agent: container event Stopped of \S+ \(runtime's stamp (\d+) ns\) for pod (\S+):", line)
    if m:
        if m.group(3) not in stamp:
            waiting[m.group(3)] = int(m.group(2)) / 1e9
        stamp.setdefault(m.group(3), int(m.group(2)) / 1e9)
        delay.append((t(m.group(1)) - int(m.group(2)) / 1e9) * 1000)
        continue
    m = re.match(r"(\S+) INFO  status::manager: pod status: exit-bench/exit(\d+)-\S+ .*Terminated", line)
    if m:
        first_status.setdefault(int(m.group(2)), t(m.group(1)))
# Pod p exits 5 + p seconds after it starts, a second after pod p - 1: the k-th exit (by the
# runtime's stamps) is the k-th pod's status.
stamps = sorted(stamp.values())
statuses = [first_status[p] for p in sorted(first_status)]
status = [(b - a) * 1000 for a, b in zip(stamps, statuses)]
for name, xs in (("event delay (runtime stamp -> picolet logs the event)", delay),
                 ("exit -> sync (runtime stamp -> the pod worker starts its sync)", sync),
                 ("exit -> status Terminated (runtime stamp -> status line)", status)):
    if xs:
        print(f"{name}: n={len(xs)} min {min(xs):.1f} ms, median {statistics.median(xs):.1f} ms, max {max(xs):.1f} ms")
    else:
        print(f"{name}: no samples")
PY
	echo "   log: $WORK/picolet.log"
	tests/e2e/lab.sh down "$LAB" >/dev/null 2>&1 || echo "exit_latency.sh: lab.sh down failed" >&2
	LAB=''
done
