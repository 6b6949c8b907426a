#!/usr/bin/env bash
# Idle CPU of two picolet binaries (or one binary with two sets of flags) side by side: the
# same pods, the same runtime, the same window, so the machine's load falls on both alike.
#
#   sudo benches/idle_ab.sh [--runtime containerd2] [--pods 50] [--secs 600] [--settle 60]
#                           A_BIN B_BIN [-- B_FLAGS...]
#
# Two labs (tests/e2e/lab.sh: directories /tmp/picolet-ab-a and -b, bridges picoaba/picoabb,
# subnets 10.88.140.0/24 and 10.88.141.0/24), each with N static pods (busybox looping on
# `sleep 1`) and one picolet at the default log level (A_BIN with its defaults, B_BIN with
# B_FLAGS). Once every pod runs and SETTLE seconds passed, each one's CPU over the same SECS:
# utime + stime of /proc/PID/stat (clock ticks; it counts the threads that exited in the
# window, which a sum over /proc/PID/task/*/schedstat would lose), its main thread's
# voluntary context switches (its wake-ups), and the bytes it wrote. Prints one line each.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=containerd2 pods=50 secs=600 settle=60
while (($#)); do
	case "$1" in
	--runtime) runtime=$2; shift ;;
	--pods) pods=$2; shift ;;
	--secs) secs=$2; shift ;;
	--settle) settle=$2; shift ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) break ;;
	-*) echo "idle_ab.sh: unknown argument $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
(($# >= 2)) || { echo "idle_ab.sh: needs A_BIN and B_BIN (--help)" >&2; exit 2; }
A_BIN=$(realpath "$1") B_BIN=$(realpath "$2")
shift 2
[[ ${1:-} == -- ]] && shift
B_FLAGS=("$@")
[[ $EUID -eq 0 ]] || { echo "idle_ab.sh: needs root (the lab)" >&2; exit 1; }
log() { printf 'idle_ab.sh: %s\n' "$*" >&2; }
crictl=$(tests/upstream/build.sh --path crictl)

declare -A LAB PID WORK
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
	LAB[$s]=/tmp/picolet-ab-$s
	WORK[$s]=$(mktemp -d /tmp/picolet-ab-work-$s.XXXXXX)
	mkdir -p "${WORK[$s]}/manifests"
	ep=$(PICOLET_LAB_RUNTIME=$runtime PICOLET_LAB_BRIDGE=picoab$s PICOLET_LAB_SUBNET=10.88.14$i.0/24 \
		tests/e2e/lab.sh up "${LAB[$s]}" 2>"${WORK[$s]}/lab.log" | tail -n 1) ||
		{ cat "${WORK[$s]}/lab.log" >&2; exit 1; }
	for n in $(seq -f '%04g' 0 $((pods - 1))); do
		cat >"${WORK[$s]}/manifests/idle-$n.yaml" <<-EOF
			apiVersion: v1
			kind: Pod
			metadata:
			  name: idle-$n
			  namespace: picolet-ab
			spec:
			  terminationGracePeriodSeconds: 2
			  containers:
			  - name: app
			    image: localhost/busybox:edge
			    imagePullPolicy: IfNotPresent
			    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
		EOF
	done
	bin=$A_BIN shown=""
	[[ $s == b ]] && bin=$B_BIN flags=("${B_FLAGS[@]}")
	RUST_LOG=info "$bin" run --pod-manifest-path "${WORK[$s]}/manifests" --container-runtime-endpoint "$ep" \
		--root-dir "${WORK[$s]}/root" --pod-log-dir "${WORK[$s]}/logs" --hostname-override "ab-$s" \
		--cgroup-root "/picolet-ab-$s" --port $((10380 + i)) "${flags[@]}" >"${WORK[$s]}/picolet.log" 2>&1 &
	PID[$s]=$!
	i=$((i + 1))
done
for s in a b; do
	deadline=$((SECONDS + 300))
	until (($("$crictl" --runtime-endpoint "unix://${LAB[$s]}/runtime.sock" ps --state running -q 2>/dev/null | wc -l) >= pods)); do
		((SECONDS < deadline)) || { log "$s: $pods pods not running after 300 s"; tail -n 20 "${WORK[$s]}/picolet.log" >&2; exit 1; }
		kill -0 "${PID[$s]}" 2>/dev/null || { log "$s: picolet exited"; tail -n 20 "${WORK[$s]}/picolet.log" >&2; exit 1; }
		sleep 2
	done
done
log "$pods pods running in each lab; settling $settle s"
sleep "$settle"
hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
wakes() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/task/$1/status"; }
written() { awk '/^write_bytes/ { print $2 }' "/proc/$1/io"; }
declare -A T W B
for s in a b; do T[$s]=$(ticks "${PID[$s]}") W[$s]=$(wakes "${PID[$s]}") B[$s]=$(written "${PID[$s]}"); done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "measuring $secs s (load $load0)"
sleep "$secs"
for s in a b; do
	kill -0 "${PID[$s]}" 2>/dev/null || { log "$s: picolet exited during the window"; exit 1; }
	t=$(($(ticks "${PID[$s]}") - T[$s]))
	w=$(($(wakes "${PID[$s]}") - W[$s]))
	b=$(($(written "${PID[$s]}") - B[$s]))
	bin=$A_BIN shown=""
	[[ $s == b ]] && bin=$B_BIN shown=${B_FLAGS[*]}
	printf '%s: %s %s| CPU %d ticks in %d s = %s %% of a core | main-thread wake-ups %s/s | %d bytes written | %d pods, %s | load %s -> %s\n' \
		"$s" "$bin" "${shown:+$shown }" "$t" "$secs" "$(awk -v t="$t" -v h="$hz" -v s="$secs" 'BEGIN { printf "%.4f", t * 100 / h / s }')" \
		"$(awk -v w="$w" -v s="$secs" 'BEGIN { printf "%.2f", w / s }')" "$b" "$pods" "$runtime" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
