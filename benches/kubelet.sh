#!/usr/bin/env bash
# picolet beside the upstream kubelet: the same machine, the same containerd, the
# same static pods, runs alternated (picolet, kubelet, then kubelet, picolet, ...) so that the
# machine's load falls on both. Standalone mode only (the cluster figures: benches/kubelet_cluster.sh).
#
#   sudo benches/kubelet.sh [--picolet BIN] [--idle-secs 600] [--settle 60] [--counts 0,10,50,100]
#                           [--idle-counts 10,50] [--lat-reps 3] [--only footprint|latency]
#   benches/kubelet.sh --table [OUT]      the summary table of a finished run again
#
# The kubelet: k8s.io/kubernetes/cmd/kubelet at the pinned version (tests/upstream/build.sh
# kubelet, tests/upstream/versions.sh), standalone (no --kubeconfig), a KubeletConfiguration
# file written below: staticPodPath, containerRuntimeEndpoint (the lab's containerd 1.6),
# cgroupDriver cgroupfs, cgroupRoot /kubelet-kbench, failCgroupV1: false (this machine runs
# cgroup v1, which the kubelet refuses from 1.35 without it), port 10383, healthzPort 10384,
# readOnlyPort 0, its own root, cert and pod log directories, the eviction manager on memory
# only and image GC off (this machine's disk is 98-99 % full: both would act on the build
# machine's disk, not on the pods) — picolet gets the same two settings by its flags.
# The kubelet runs in its own mount and network namespace (unshare -m -n): what it writes
# outside --root-dir (/var/lib/kubelet/device-plugins, /var/log/containers), the host sysctls
# it sets at start (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1: here it
# reads those values from files bound over /proc/sys/... in its namespace, so it sets none)
# and its iptables chains stay in the namespace. Its CRI socket is a file: reached as usual.
# picolet: the release binary (cargo build --release, or --picolet BIN), RUST_LOG=info.
#
# Figures (one line each in OUT/results.tsv, with the load average; OUT/table.md at the end):
#   size        the binaries, stripped (picolet's release profile strips; the kubelet is linked
#               with -s -w as the release's), x86_64; kubelet-arm64/-armv7 if built
#   footprint   N pods (--counts), every manifest there before the agent starts: time until
#               2N tasks run, then SETTLE s, VmRSS, VmHWM, Pss (smaps_rollup), threads
#   idle        at --idle-counts, after that: IDLE_SECS of nothing changing: CPU (utime+stime
#               of /proc/PID/stat, 10 ms ticks), voluntary context switches of all threads,
#               write_bytes (/proc/PID/io, its log file is on the same disk), the CRI calls
#               containerd served (its grpc_server_started_total, by method), containerd's own
#               CPU; RSS/Pss again at the end
#   latency     the agent running with an empty directory (20 s settle), then: 1 manifest
#               written → its container started (containerd's StartedAt), 20 at once → the
#               newest StartedAt, then the 20 files removed → every task gone (mass delete);
#               the CRI calls of each step (LAT_REPS rounds, a fresh agent each)
# Pods: one busybox container `trap 'exit 0' TERM; while true; do sleep 1 & wait; done`
# (the one of benches/picolet.rs), terminationGracePeriodSeconds 2, namespace kbench.
#
# Lab resources (environment, defaults for helper kbench): KBENCH_DIR (/tmp/kbench: the lab,
# the agents' directories, OUT=KBENCH_DIR/out), PICOLET_LAB_BRIDGE (picokb), PICOLET_LAB_SUBNET
# (10.88.133.0/24), KBENCH_METRICS (127.0.0.1:10385, containerd's metrics), KBENCH_PICOLET_PORT
# (10373). Everything started is stopped and removed on exit, also on failure or Ctrl-C.
set -euo pipefail
shopt -s inherit_errexit

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
D=${KBENCH_DIR:-/tmp/kbench}
OUT=$D/out
LAB=$D/lab
export PICOLET_LAB_BRIDGE=${PICOLET_LAB_BRIDGE:-picokb}
export PICOLET_LAB_SUBNET=${PICOLET_LAB_SUBNET:-10.88.133.0/24}
export PICOLET_LAB_METRICS=${KBENCH_METRICS:-127.0.0.1:10385}
P_PORT=${KBENCH_PICOLET_PORT:-10373}
K_PORT=10383 K_HEALTHZ=10384
P_CGROUP=picolet-kbench K_CGROUP=kubelet-kbench
NS=kbench
K_NODE_IP=${PICOLET_LAB_SUBNET%.*}.250

picolet=${CARGO_TARGET_DIR:-$REPO/target}/release/picolet
idle_secs=600 settle=60 counts=0,10,50,100 idle_counts=10,50 lat_reps=3 only=""
while (($#)); do
	case "$1" in
	--picolet) picolet=$2; shift ;;
	--idle-secs) idle_secs=$2; shift ;;
	--settle) settle=$2; shift ;;
	--counts) counts=$2; shift ;;
	--idle-counts) idle_counts=$2; shift ;;
	--lat-reps) lat_reps=$2; shift ;;
	--only) only=$2; shift ;;
	--table)
		python3 "$REPO/benches/kubelet_table.py" "${2:-$OUT}/results.tsv"
		exit 0
		;;
	-h | --help)
		sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "kubelet.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
[[ $EUID -eq 0 ]] || {
	echo "kubelet.sh: needs root (the lab, cgroups, namespaces)" >&2
	exit 1
}
[[ -x $picolet ]] || {
	echo "kubelet.sh: no picolet at $picolet (cargo build --release, or --picolet BIN)" >&2
	exit 1
}
picolet=$(realpath "$picolet")

log() { printf 'kubelet.sh %s: %s\n' "$(date +%T)" "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# add AGENT PODS METRIC VALUE [NOTE]: one figure, with the load average now.
add() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "$(load)" >>"$OUT/results.tsv"
	log "$1 $2 pods: $3 = $4 ${5:-}"
}

kubelet=$(tests/upstream/build.sh --path kubelet)
crictl=$(tests/upstream/build.sh --path crictl)
mkdir -p "$OUT/logs"
echo "timeout: 20" >"$D/crictl.yaml"
[[ -f $OUT/results.tsv ]] && mv "$OUT/results.tsv" "$OUT/results.$(date +%s).tsv"
: >"$OUT/results.tsv"

apid="" agent="" adir="" lab_up=0
# Stops the agent, removes every pod from containerd, the agent's directory and cgroups.
stop_agent() {
	if [[ -n $apid ]]; then
		kill -TERM "$apid" 2>/dev/null || true
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$apid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$apid" 2>/dev/null || true
		wait "$apid" 2>/dev/null || true
		apid=""
	fi
	if ((lab_up)); then
		cri rmp -fa >/dev/null 2>&1 || true
		cri rm -fa >/dev/null 2>&1 || true
	fi
	if [[ -n $adir && -d $adir ]]; then
		# Volume mounts a picolet may have made under its root (none for these pods).
		awk -v d="$adir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r mp; do
			umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
		done
		[[ -f $adir/agent.log ]] && cp "$adir/agent.log" "$OUT/logs/$(basename "$adir").log"
		rm -rf --one-file-system "$adir"
	fi
	adir=""
	remove_cgroups
}
# The two agents' cgroup roots, deepest first; rmdir only (a busy one stays and is reported).
remove_cgroups() {
	local c
	for c in /sys/fs/cgroup/*/"$P_CGROUP" /sys/fs/cgroup/*/"$K_CGROUP"; do
		[[ -d $c ]] || continue
		find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || log "cgroup $c not empty"
	done
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local rc=$?
	set +e
	stop_agent
	if ((lab_up)); then tests/e2e/lab.sh down "$LAB" >>"$OUT/logs/lab.log" 2>&1 || log "lab down failed: $OUT/logs/lab.log"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cri() { "$crictl" --config "$D/crictl.yaml" --runtime-endpoint "unix://$LAB/containerd.sock" --image-endpoint "unix://$LAB/containerd.sock" "$@"; }

# --- the machine, the binaries ----------------------------------------------------------------
{
	echo "- date: $(date -u +%FT%TZ); uptime: $(uptime)"
	echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; $(free -h | awk '/^Mem:/ { print $2 }') memory"
	echo "- kernel: $(uname -r); cgroups: $(stat -fc %T /sys/fs/cgroup | sed 's/tmpfs/v1/; s/cgroup2fs/v2/')"
	echo "- picolet: $picolet ($(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD -- src || echo ', src modified'))"
	echo "- kubelet: $kubelet ($("$kubelet" --version))"
	echo "- containerd: $(containerd --version | awk '{ print $3 }') (tests/e2e/lab.sh, $LAB)"
	echo "- idle window $idle_secs s, settle $settle s, counts $counts, idle counts $idle_counts, latency rounds $lat_reps"
} >"$OUT/machine.md"
cat "$OUT/machine.md" >&2

size_of() { stat -L -c %s "$1"; }
add picolet - "binary x86_64" "$(size_of "$picolet")" "B; $(file -b "$picolet" | grep -o 'not stripped\|stripped' | head -1); glibc, dynamically linked"
add kubelet - "binary x86_64" "$(size_of "$kubelet")" "B; $(file -b "$kubelet" | grep -o 'not stripped\|stripped' | head -1); -s -w, CGO_ENABLED=0, static"
for c in kubelet-arm64 kubelet-armv7; do
	s=$(tests/upstream/build.sh --list | awk -v c="$c" '$1 == c && $4 == "cached" { print "y" }')
	[[ $s == y ]] || continue
	b=$(tests/upstream/build.sh --path "$c")
	add kubelet - "binary ${c#kubelet-}" "$(size_of "$b")" "B; GOARCH=$(file -b "$b" | cut -d, -f2 | sed 's/^ //'), CGO_ENABLED=0"
done

# --- the lab ------------------------------------------------------------------------------------
log "lab: tests/e2e/lab.sh up $LAB (bridge $PICOLET_LAB_BRIDGE, $PICOLET_LAB_SUBNET, metrics $PICOLET_LAB_METRICS)"
lab_up=1
EP=$(tests/e2e/lab.sh up "$LAB" 2>"$OUT/logs/lab-up.log" | tail -n 1) || {
	cat "$OUT/logs/lab-up.log" >&2
	exit 1
}
CTRD_PID=$(cat "$LAB/runtime.pid")
TASKS=$LAB/state/io.containerd.runtime.v2.task/k8s.io

# CRI calls containerd served, by method: "Method count" lines.
cri_calls() {
	curl -sf "http://$PICOLET_LAB_METRICS/v1/metrics" | awk '
		/^grpc_server_started_total\{/ && /grpc_service="runtime\.v1\.(Runtime|Image)Service"/ {
			match($0, /grpc_method="[^"]*"/); m = substr($0, RSTART + 13, RLENGTH - 14); n[m] += $NF }
		END { for (m in n) print m, n[m] }' | sort
}
# calls_delta BEFORE AFTER: "total m1=n1 m2=n2 ..." (methods with a non-zero delta).
calls_delta() {
	join -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") | awk '
		{ d = $3 - $2; if (d > 0) { t += d; s = s " " $1 "=" d } } END { print t + 0 s }'
}
# Tasks alive in containerd (each sandbox and container has one bundle directory).
tasks() { find "$TASKS" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l; }
# wait_tasks N SECS: until exactly N tasks; fails after SECS.
wait_tasks() {
	local end=$((SECONDS + $2))
	until (($(tasks) == $1)); do
		((SECONDS < end)) || return 1
		kill -0 "$apid" 2>/dev/null || {
			log "$agent exited: $(tail -n 5 "$adir/agent.log")"
			return 1
		}
		sleep 0.1
	done
}

# What one crictl ps costs in CRI calls (subtracted where the bench polls with it).
c0=$(cri_calls)
cri ps -q >/dev/null
c1=$(cri_calls)
log "one 'crictl ps' = $(calls_delta "$c0" "$c1") CRI calls"

manifest() { # NAME
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: localhost/busybox:edge
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c"]
    args: ["trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
EOF
}
# write_manifests FROM COUNT: kb-FROM ... renamed into the directory one by one.
write_manifests() {
	local i
	for ((i = $1; i < $1 + $2; i++)); do
		manifest "$(printf 'kb-%04d' "$i")" >"$adir/tmp/kb-$i.yaml"
		mv "$adir/tmp/kb-$i.yaml" "$adir/manifests/kb-$i.yaml"
	done
}

kubelet_config() {
	cat <<EOF
# benches/kubelet.sh: the kubelet standalone, beside picolet.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $adir/manifests
containerRuntimeEndpoint: $EP
address: 127.0.0.1
port: $K_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $K_HEALTHZ
readOnlyPort: 0
cgroupDriver: cgroupfs
cgroupRoot: /$K_CGROUP
failCgroupV1: false
failSwapOn: false
podLogsDir: $adir/logs
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: 100Mi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
}

# The kubelet's namespace: loopback up, nothing propagates back, /var/lib and /var/log private
# (/var/lib/kubelet/device-plugins and /var/log/containers are fixed paths), the sysctls it
# would set read as already set, an address of the lab's subnet as its node IP.
kubelet_ns_script() {
	cat <<EOF
set -e
ip link set lo up
# The node's address: a veth end (nothing behind it) as the default route; the kubelet
# refuses a loopback --node-ip at every status update ("nodeIP can't be loopback address").
ip link add kb0 type veth peer name kb1
ip addr add $K_NODE_IP/32 dev kb0
ip link set kb1 up
ip link set kb0 up
ip route add default dev kb0
mount --make-rprivate /
mount -t tmpfs -o size=1m kbench /var/lib
mkdir /var/lib/kubelet
mount --bind $adir/var-lib-kubelet /var/lib/kubelet
mount --bind $adir/var-log /var/log
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1; do
	k=\${kv%%=*}; f=$adir/sysctl-\${k//\//.}
	echo "\${kv#*=}" >"\$f"
	mount --bind "\$f" "/proc/sys/\$k"
done
exec "\$@"
EOF
}

# start_agent picolet|kubelet LABEL: a fresh directory, the agent started on it (manifests
# already there are its first pods).
new_dir() {
	adir=$D/run-$1
	rm -rf "$adir"
	mkdir -p "$adir"/{manifests,root,logs,tmp,var-lib-kubelet,var-log,pki}
}
start_agent() {
	agent=$1
	local c
	for c in /sys/fs/cgroup/*/; do
		[[ -d $c && ! -L ${c%/} ]] || continue
		mkdir -p "$c$K_CGROUP" # the kubelet wants its cgroupRoot to exist
	done
	if [[ $agent == picolet ]]; then
		RUST_LOG=info setsid "$picolet" run --pod-manifest-path "$adir/manifests" \
			--container-runtime-endpoint "$EP" --root-dir "$adir/root" --pod-log-dir "$adir/logs" \
			--hostname-override kbench-p --node-ip 127.0.0.1 --cgroup-root "/$P_CGROUP" \
			--port "$P_PORT" --eviction-hard 'memory.available<100Mi' --image-gc-high-threshold 100 \
			</dev/null >"$adir/agent.log" 2>&1 &
	else
		kubelet_config >"$adir/config.yaml"
		kubelet_ns_script >"$adir/ns.sh"
		setsid unshare -m -n bash "$adir/ns.sh" "$kubelet" --config "$adir/config.yaml" \
			--root-dir "$adir/root" --cert-dir "$adir/pki" --hostname-override kbench-k --node-ip "$K_NODE_IP" \
			</dev/null >"$adir/agent.log" 2>&1 &
	fi
	apid=$!
}

# mem LABEL: VmRSS, VmHWM, Pss (kB), threads.
mem() {
	local rss hwm pss thr
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$apid/status")
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$apid/status")
	thr=$(awk '/^Threads/ { print $2 }' "/proc/$apid/status")
	pss=$(awk '/^Pss:/ { print $2 }' "/proc/$apid/smaps_rollup")
	add "$agent" "$2" "RSS$1" "$rss" "kB; VmHWM $hwm kB; $thr threads"
	add "$agent" "$2" "PSS$1" "$pss" "kB"
}
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
vcsw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'; }
wbytes() { awk '/^write_bytes/ { print $2 }' "/proc/$1/io"; }

footprint() { # AGENT PODS
	new_dir "$1-$2"
	write_manifests 0 "$2"
	local t0 c0 c1 w0 w1 v0 v1 k0 k1 r0 r1 l0
	t0=$EPOCHREALTIME
	start_agent "$1"
	log "$agent: $2 pods, waiting for $((2 * $2)) tasks"
	wait_tasks $((2 * $2)) 900 || {
		add "$agent" "$2" "error" "FAILED" "$(tasks) tasks after 900 s"
		stop_agent
		return 0
	}
	add "$agent" "$2" "all running after start" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" "s (agent spawned with the manifests in place → 2N tasks)"
	sleep "$settle"
	mem "" "$2"
	if [[ ,$idle_counts, == *,$2,* ]]; then
		l0=$(load)
		c0=$(cri_calls) w0=$(wbytes "$apid") v0=$(vcsw "$apid") k0=$(ticks "$apid") r0=$(ticks "$CTRD_PID")
		log "$agent: idle window $idle_secs s with $2 pods (load $l0)"
		sleep "$idle_secs"
		c1=$(cri_calls) w1=$(wbytes "$apid") v1=$(vcsw "$apid") k1=$(ticks "$apid") r1=$(ticks "$CTRD_PID")
		kill -0 "$apid" || {
			add "$agent" "$2" "error" "FAILED" "exited in the idle window"
			return 0
		}
		local calls
		calls=$(calls_delta "$c0" "$c1")
		add "$agent" "$2" "idle CPU" "$(awk -v t=$((k1 - k0)) -v s="$idle_secs" 'BEGIN { printf "%.3f", t / s }')" "% of a core ($((k1 - k0)) ticks of 10 ms in $idle_secs s; window started at load $l0)"
		add "$agent" "$2" "idle wake-ups" "$(awk -v t=$((v1 - v0)) -v s="$idle_secs" 'BEGIN { printf "%.1f", t / s }')" "voluntary context switches a second, all threads"
		add "$agent" "$2" "idle CRI calls" "$(awk -v t="${calls%% *}" -v s="$idle_secs" 'BEGIN { printf "%.1f", t * 60 / s }')" "a minute (containerd's count; ${calls})"
		add "$agent" "$2" "idle bytes written" "$(awk -v t=$((w1 - w0)) -v s="$idle_secs" 'BEGIN { printf "%.0f", t * 3600 / s }')" "B an hour ($((w1 - w0)) B in $idle_secs s, scaled; log $(stat -c %s "$adir/agent.log") B at the end)"
		add "$agent" "$2" "containerd CPU while idle" "$(awk -v t=$((r1 - r0)) -v s="$idle_secs" 'BEGIN { printf "%.3f", t / s }')" "% of a core"
		mem " after idle" "$2"
	fi
	stop_agent
}

latency() { # AGENT ROUND
	new_dir "$1-lat$2"
	start_agent "$1"
	sleep 20
	local n t0 t1 c0 c1 calls started polls
	for n in 1 20; do
		c0=$(cri_calls)
		t0=$EPOCHREALTIME
		write_manifests 0 "$n"
		wait_tasks $((2 * n)) 300 || {
			add "$agent" "$n" "error" "FAILED" "start: $(tasks) tasks after 300 s"
			break
		}
		t1=$EPOCHREALTIME
		sleep 2
		c1=$(cri_calls)
		# Every container running (crictl after the count: its calls are not in it).
		polls=0
		until (($(cri ps --state running -q --namespace "$NS" | wc -l) == n)); do
			polls=$((polls + 1))
			((polls < 300)) || break
			sleep 0.2
		done
		# shellcheck disable=SC2046 # container ids
		started=$(cri inspect -o json $(cri ps -q --namespace "$NS") | python3 -c '
import datetime, json, sys
d = json.load(sys.stdin)
d = d if isinstance(d, list) else [d]
# RFC 3339 with nanoseconds: microseconds are enough here.
def ts(s):
    s = s.replace("Z", "")
    s = s[:26] if "." in s else s
    return datetime.datetime.fromisoformat(s).replace(tzinfo=datetime.timezone.utc).timestamp()
print("%.6f" % max(ts(c["status"]["startedAt"]) for c in d))')
		calls=$(calls_delta "$c0" "$c1")
		add "$agent" "$n" "start" "$(awk -v a="$t0" -v b="$started" 'BEGIN { printf "%.3f", b - a }')" "s, manifest written → newest container StartedAt (round $2; all tasks after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s)"
		add "$agent" "$n" "CRI calls per pod start" "$(awk -v t="${calls%% *}" -v n="$n" 'BEGIN { printf "%.1f", t / n }')" "(round $2; first write → all tasks + 2 s: $calls)"
		c0=$(cri_calls)
		t0=$EPOCHREALTIME
		rm -f "$adir"/manifests/*.yaml
		wait_tasks 0 300 || {
			add "$agent" "$n" "error" "FAILED" "delete: $(tasks) tasks after 300 s"
			break
		}
		t1=$EPOCHREALTIME
		c1=$(cri_calls)
		calls=$(calls_delta "$c0" "$c1")
		add "$agent" "$n" "delete" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "s, manifests removed → every task gone (round $2; CRI calls: $calls)"
		sleep 5
	done
	stop_agent
}

# --- the runs, alternated ------------------------------------------------------------------
order() { # I: picolet first for even I
	if (($1 % 2 == 0)); then echo picolet kubelet; else echo kubelet picolet; fi
}
i=0
if [[ -z $only || $only == footprint ]]; then
	for n in ${counts//,/ }; do
		for a in $(order $i); do footprint "$a" "$n"; done
		i=$((i + 1))
	done
fi
if [[ -z $only || $only == latency ]]; then
	for ((r = 1; r <= lat_reps; r++)); do
		for a in $(order $i); do latency "$a" "$r"; done
		i=$((i + 1))
	done
fi
echo "- end: $(date -u +%FT%TZ); uptime: $(uptime)" >>"$OUT/machine.md"
python3 "$REPO/benches/kubelet_table.py" "$OUT/results.tsv" | tee "$OUT/table.md"
