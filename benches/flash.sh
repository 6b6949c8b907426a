#!/usr/bin/env bash
# Bytes written to disk by two picolet binaries side by side, and by their runtimes: the
# same pods, the same runtime, the same windows.
#
#   sudo benches/flash.sh [--runtime containerd] [--pods 10] [--secs 600] A_BIN B_BIN
#
# Two labs (tests/e2e/lab.sh: directories /tmp/picolet-fl-a and -b, bridges picofla/picoflb,
# subnets 10.88.142.0/24 and 10.88.143.0/24), each with N static pods whose container fails
# twice (exit 1 at attempts 0 and 1, then loops on `sleep 1`): container GC then removes each
# pod's oldest dead instance and its log file, as on a board whose pods once crashed, and the
# pod log directories change. Once every pod runs its third instance, two windows: the first
# 120 s (container GC's passes, a minute apart, come in it) and then SECS of steady idle.
# For each: write_bytes of picolet (/proc/PID/io, the default log level, its stderr to a
# file on the same disk) and of its runtime (the runtime and its shims or conmons: the
# processes whose command line names the lab directory). Prints one line per lab and window.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=containerd pods=10 secs=600 settle=120
while (($#)); do
	case "$1" in
	--runtime) runtime=$2; shift ;;
	--pods) pods=$2; shift ;;
	--secs) secs=$2; shift ;;
	--settle) settle=$2; shift ;;
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) break ;;
	-*) echo "flash.sh: unknown argument $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
(($# >= 2)) || { echo "flash.sh: needs A_BIN and B_BIN (--help)" >&2; exit 2; }
A_BIN=$(realpath "$1") B_BIN=$(realpath "$2")
shift 2
[[ ${1:-} == -- ]] && shift
B_FLAGS=("$@")
[[ $EUID -eq 0 ]] || { echo "flash.sh: needs root (the lab)" >&2; exit 1; }
log() { printf 'flash.sh: %s\n' "$*" >&2; }
crictl=$(tests/upstream/build.sh --path crictl)

declare -A LAB PID WORK EP
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local s
	for s in a b; do
		[[ -z ${PID[$s]:-} ]] || { kill "${PID[$s]}" 2>/dev/null || true; wait "${PID[$s]}" 2>/dev/null || true; }
		# The pods go with the lab (lab.sh down stops its runtime and removes its state).
		[[ -z ${LAB[$s]:-} ]] || tests/e2e/lab.sh down "${LAB[$s]}" >/dev/null 2>&1 || log "lab.sh down ${LAB[$s]} failed"
		[[ -z ${WORK[$s]:-} ]] || rm -rf "${WORK[$s]}"
	done
}
trap cleanup EXIT

i=0
for s in a b; do
	LAB[$s]=/tmp/picolet-fl-$s
	WORK[$s]=$(mktemp -d /tmp/picolet-fl-work-$s.XXXXXX)
	mkdir -p "${WORK[$s]}/manifests"
	EP[$s]=$(PICOLET_LAB_RUNTIME=$runtime PICOLET_LAB_BRIDGE=picofl$s PICOLET_LAB_SUBNET=10.88.14$((i + 2)).0/24 \
		tests/e2e/lab.sh up "${LAB[$s]}" 2>"${WORK[$s]}/lab.log" | tail -n 1) ||
		{ cat "${WORK[$s]}/lab.log" >&2; exit 1; }
	for n in $(seq -f '%04g' 0 $((pods - 1))); do
		cat >"${WORK[$s]}/manifests/flash-$n.yaml" <<-EOF
			apiVersion: v1
			kind: Pod
			metadata:
			  name: flash-$n
			  namespace: picolet-fl
			spec:
			  terminationGracePeriodSeconds: 2
			  volumes: [{name: state, emptyDir: {}}]
			  containers:
			  - name: app
			    image: localhost/busybox:edge
			    imagePullPolicy: IfNotPresent
			    volumeMounts: [{name: state, mountPath: /state}]
			    command: ["sh", "-c", "n=\$(cat /state/n 2>/dev/null || echo 0); echo \$((n + 1)) > /state/n; echo attempt \$n; [ \$n -ge 2 ] || exit 1; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
		EOF
	done
	bin=$A_BIN flags=()
	[[ $s == b ]] && bin=$B_BIN flags=("${B_FLAGS[@]}")
	# No eviction manager: this machine's disk reads as under pressure the kubelet's way, and
	# its log line every pass would be counted (the same for both).
	RUST_LOG=info "$bin" run --pod-manifest-path "${WORK[$s]}/manifests" --container-runtime-endpoint "${EP[$s]}" \
		--root-dir "${WORK[$s]}/root" --pod-log-dir "${WORK[$s]}/logs" --hostname-override "fl-$s" \
		--cgroup-root "/picolet-fl-$s" --port $((10382 + i)) --eviction-hard "" "${flags[@]}" >"${WORK[$s]}/picolet.log" 2>&1 &
	PID[$s]=$!
	i=$((i + 1))
done
for s in a b; do
	deadline=$((SECONDS + 600))
	# Every pod on its third instance: N running, and 2N exited before them (GC may
	# already have removed some: then N running with attempt 2 is enough).
	until (($("$crictl" --runtime-endpoint "${EP[$s]}" ps --state running -o json 2>/dev/null |
		grep -cE '"attempt": +2') >= pods)); do
		((SECONDS < deadline)) || { log "$s: $pods pods not on their third instance after 600 s"; tail -n 20 "${WORK[$s]}/picolet.log" >&2; exit 1; }
		kill -0 "${PID[$s]}" 2>/dev/null || { log "$s: picolet exited"; tail -n 20 "${WORK[$s]}/picolet.log" >&2; exit 1; }
		sleep 2
	done
done
log "$pods pods on their third instance in each lab"
written() { awk '/^write_bytes/ { print $2 }' "/proc/$1/io" 2>/dev/null || echo 0; }
# The runtime's processes: the command line names the lab directory.
runtime_written() {
	local lab=$1 total=0 p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "$lab" || continue
		total=$((total + $(written "${p#/proc/}")))
	done
	echo "$total"
}
declare -A B R L
window() { # NAME SECS
	local name=$1 w=$2 s
	for s in a b; do
		B[$s]=$(written "${PID[$s]}") R[$s]=$(runtime_written "${LAB[$s]}")
		L[$s]=$(stat -c %s "${WORK[$s]}/picolet.log")
	done
	local load0
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	log "window $name: $w s (load $load0)"
	sleep "$w"
	for s in a b; do
		kill -0 "${PID[$s]}" 2>/dev/null || { log "$s: picolet exited during the window"; exit 1; }
		local b r bin=$A_BIN
		[[ $s == b ]] && bin=$B_BIN
		b=$(($(written "${PID[$s]}") - B[$s]))
		r=$(($(runtime_written "${LAB[$s]}") - R[$s]))
		local lines
		lines=$(tail -c +$((L[$s] + 1)) "${WORK[$s]}/picolet.log" | wc -l)
		printf '%s: %s | %s %d s | picolet %d bytes written, %d log lines | %s %d bytes | %d pods | load %s -> %s\n' \
			"$s" "$bin" "$name" "$w" "$b" "$lines" "$runtime" "$r" "$pods" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
		# What the lines were (the first few), so a write can be traced to its line.
		tail -c +$((L[$s] + 1)) "${WORK[$s]}/picolet.log" | head -n 5 | cut -c1-200 | sed "s/^/  $s log: /"
	done
}
window "after-restarts" "$settle"
window "steady" "$secs"
