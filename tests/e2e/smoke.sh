#!/usr/bin/env bash
# Smoke test of the lab, after `tests/e2e/lab.sh up [LAB_DIR]`:
#
#   tests/e2e/smoke.sh [LAB_DIR]
#
# Proves what picolet relies on, with ctr and the stdlib CRI client cri.py, and with upstream's
# crictl too when PICOLET_CRICTL names one (tests/upstream/build.sh crictl; ci.sh sets it):
# the runtime answers (containerd: its CRI plugin is loaded), RuntimeReady + NetworkReady, both local
# images are visible to CRI ImageStatus (and a bare name is not: the documented gotcha), and a
# real pod runs: RunPodSandbox on the CNI bridge, a container whose CRI-format log line
# appears, then StopPodSandbox + RemovePodSandbox leave no task and no mount behind.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
LAB=$(realpath -m "${1:-$REPO/.lab}")
SOCK="$LAB/containerd.sock"
RUNTIME=containerd
SUBNET=${PICOLET_LAB_SUBNET:-10.88.77.0/24}
# lab.sh's remembered settings: RUNTIME, SOCK, BRIDGE, SUBNET (and CONTAINERD2_BIN_DIR).
if [[ -f "$LAB/lab.env" ]]; then
	# shellcheck source=/dev/null
	. "$LAB/lab.env"
fi
EP="unix://$SOCK"
# The containerds' own client: the lab's build for containerd2, Debian's for containerd.
CTR=ctr
[[ -z "${CONTAINERD2_BIN_DIR:-}" ]] || CTR="$CONTAINERD2_BIN_DIR/ctr"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

checks=0
t0=${EPOCHREALTIME/,/.}
ok() {
	checks=$((checks + 1))
	printf 'smoke: ok   %s\n' "$*"
}
fail() {
	printf 'smoke: FAIL %s\n' "$*" >&2
	if [[ -f "$LAB/runtime.log" ]]; then
		echo "--- last lines of $LAB/runtime.log:" >&2
		tail -n 15 "$LAB/runtime.log" | cut -c1-400 >&2
	fi
	exit 1
}
cri() { python3 "$SCRIPT_DIR/cri.py" -e "$EP" "$@"; }
# containerd 2.x's ctr repeats the daemon's deprecation warnings (cgroup v1): dropped.
ctr_() { timeout 20 "$CTR" -a "$SOCK" -n k8s.io "$@" 2> >(grep -v 'msg="DEPRECATION: ' >&2 || true); }
is_containerd() { [[ $RUNTIME == containerd || $RUNTIME == containerd2 ]]; }

[[ -S "$SOCK" ]] || fail "no socket $SOCK (run: tests/e2e/lab.sh up $LAB)"

if is_containerd; then
	server=$("$CTR" -a "$SOCK" version 2>&1 | awk '/^Server:/ { s = 1 } s && /Version:/ { print $2; exit }') ||
		fail "ctr version"
	[[ -n "$server" ]] || fail "ctr version: no server version"
	ok "containerd answers on $SOCK (server $server, runtime $RUNTIME)"

	plugin=$("$CTR" -a "$SOCK" plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
	[[ "$plugin" == ok ]] || fail "CRI plugin status '$plugin'"
	ok "CRI plugin loaded"

	images=$(ctr_ images ls -q)
	for image in localhost/pause:edge localhost/busybox:edge; do
		grep -qxF "$image" <<<"$images" || fail "ctr images ls: $image missing"
	done
	ok "ctr images ls: localhost/pause:edge localhost/busybox:edge"
elif [[ $RUNTIME == crio ]]; then
	server=$("$LAB/bin/crio" --version 2>&1 | awk 'NR == 1 { print $3 }') || fail "crio --version"
	[[ -n "$server" ]] || fail "crio --version: no version"
	ok "CRI-O $server on $SOCK (crio --version; images are checked through CRI below)"
else
	echo "smoke: skip ctr checks (runtime $RUNTIME is not a containerd)"
fi

version=$(cri version) || fail "CRI Version"
ok "CRI Version: $version"

status=$(cri status) || fail "CRI Status: $status"
ok "CRI Status: $(tr '\n' ' ' <<<"$status")"

for image in localhost/pause:edge localhost/busybox:edge; do
	cri image "$image" >/dev/null || fail "CRI ImageStatus $image: not present"
done
ok "CRI ImageStatus finds both images"
if cri image busybox:edge >/dev/null; then
	fail "CRI ImageStatus found a bare 'busybox:edge' (the doc says it must not)"
fi
ok "CRI ImageStatus does not resolve a bare name (use localhost/...)"

# The same runtime through a CRI client that is not ours.
# Its own config file, so that it reads no /etc/crictl.yaml (and does not warn about one).
crictl_() { timeout 20 "$PICOLET_CRICTL" --config "$LAB/crictl.yaml" "$@"; }
if [[ -n "${PICOLET_CRICTL:-}" ]]; then
	printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 10\n' "$EP" "$EP" >"$LAB/crictl.yaml"
	cv=$(crictl_ version) || fail "crictl version: $cv"
	want=containerd
	[[ $RUNTIME != crio ]] || want=cri-o
	grep -q "^RuntimeName: *$want\$" <<<"$cv" || fail "crictl version: $cv"
	crictl_ inspecti localhost/busybox:edge >/dev/null || fail "crictl inspecti localhost/busybox:edge"
	ok "crictl $("$PICOLET_CRICTL" --version | awk '{print $NF}'): $(tr '\n' ' ' <<<"$cv" | tr -s ' ')"
fi

uid="smoke-$$"
# Mounts under the lab before the pod (CRI-O's store keeps one of its own there).
mounts_before=$(awk -v lab="$LAB/" 'index($5, lab) == 1' /proc/self/mountinfo | wc -l)
# Under the lab's own cgroup root (lab.sh cgroup_roots): `down` removes what it made there.
BRIDGE=${BRIDGE:-${PICOLET_LAB_BRIDGE:-picolet0}}
# shellcheck disable=SC2016 # $(hostname) is for the container's shell
out=$(cri run-pod smoke --namespace lab-smoke --uid "$uid" --log-dir "$LAB/smoke-logs" \
	--cgroup-parent "/picolet-smoke-$BRIDGE/pod$uid" \
	--cmd 'echo "hello from $(hostname)"; exec sleep 3600') || fail "RunPodSandbox/CreateContainer/StartContainer: $out"
ip=$(sed -n 's/.* ip=\([^ ]*\) .*/\1/p' <<<"$out")
logfile=$(sed -n 's/.* log=\([^ ]*\) .*/\1/p' <<<"$out")
timings=$(grep -o 'run_sandbox_ms=.*' <<<"$out")
[[ "$ip" == "${SUBNET%.*/*}".* ]] || fail "pod IP '$ip' not in $SUBNET"
ok "pod running, IP $ip on the bridge ($timings)"

for _ in $(seq 50); do
	grep -q ' stdout F hello from smoke$' "$logfile" 2>/dev/null && break
	sleep 0.1
done
# CRI format: RFC 3339 time (containerd writes ...Z, CRI-O's conmon ...+00:00), stream, tag.
grep -qE '^[0-9T:.-]+(Z|[+-][0-9]{2}:[0-9]{2}) stdout F hello from smoke$' "$logfile" ||
	fail "no CRI-format log line in $logfile: $(cat "$logfile" 2>/dev/null)"
ok "container log in CRI format: $(head -n 1 "$logfile")"
if [[ -n "${PICOLET_CRICTL:-}" ]]; then
	n=$(crictl_ pods -q --label "io.kubernetes.pod.uid=$uid" --state ready | wc -l)
	[[ "$n" -eq 1 ]] || fail "crictl pods: $n ready sandbox(es) with uid $uid, expected 1"
	ok "crictl pods sees the sandbox ready"
fi

cri rm-pods --label "io.kubernetes.pod.uid=$uid" >/dev/null || fail "StopPodSandbox/RemovePodSandbox"
if is_containerd; then
	[[ -z "$(ctr_ tasks ls -q)" ]] || fail "tasks left after RemovePodSandbox: $(ctr_ tasks ls -q | tr '\n' ' ')"
elif [[ $RUNTIME == crio ]]; then
	left=$(runc --root "$LAB/runc" list -q 2>/dev/null || true)
	[[ -z "$left" ]] || fail "containers left in runc after RemovePodSandbox: $(tr '\n' ' ' <<<"$left")"
fi
left=$(awk -v lab="$LAB/" 'index($5, lab) == 1' /proc/self/mountinfo | wc -l)
[[ "$left" -le "$mounts_before" ]] || fail "$((left - mounts_before)) mount(s) left under $LAB after RemovePodSandbox"
rm -rf "$LAB/smoke-logs"
ok "pod removed: no task, no mount left"

printf 'smoke: %d checks passed in %s s\n' "$checks" "$(awk -v a="$t0" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.2f", b - a }')"
