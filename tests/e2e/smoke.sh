#!/usr/bin/env bash
# Smoke test of the lab, after `tests/e2e/lab.sh up [LAB_DIR]`:
#
#   tests/e2e/smoke.sh [LAB_DIR]
#
# Proves what picolet relies on, with the runtime's own tool (ctr for containerd, the crio
# binary and runc for CRI-O), the stdlib CRI client cri.py, and upstream's crictl too when
# PICOLET_CRICTL names one (tests/upstream/build.sh crictl; ci.sh sets it): the runtime
# answers, RuntimeReady + NetworkReady, both local images are visible to CRI ImageStatus (and
# a bare name is not: the documented gotcha), and a real pod runs: RunPodSandbox on the CNI
# bridge, a container whose CRI-format log line appears, then StopPodSandbox +
# RemovePodSandbox leave no container and no new mount behind.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
LAB=$(realpath -m "${1:-$REPO/.lab}")
SUBNET=${PICOLET_LAB_SUBNET:-10.88.77.0/24}
RUNTIME=${PICOLET_LAB_RUNTIME:-containerd}
if [[ -f "$LAB/lab.env" ]]; then
	# shellcheck source=/dev/null
	. "$LAB/lab.env"
fi
case "$RUNTIME" in
crio) SOCK="$LAB/crio.sock" RUNTIME_NAME=cri-o ;;
*) SOCK="$LAB/containerd.sock" RUNTIME_NAME=containerd ;;
esac
EP="unix://$SOCK"
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
ctr_() { timeout 20 ctr -a "$SOCK" -n k8s.io "$@"; }

[[ -S "$SOCK" ]] || fail "no socket $SOCK (run: tests/e2e/lab.sh up $LAB)"

# Containers the runtime still has (its own tool, not CRI): one id per line.
runtime_containers() {
	if [[ $RUNTIME == crio ]]; then
		local rt
		for rt in runc crun; do
			[[ -d "$LAB/$rt" ]] && "$rt" --root "$LAB/$rt" list -q 2>/dev/null
		done
		return 0
	fi
	ctr_ tasks ls -q
}

if [[ $RUNTIME == crio ]]; then
	server=$("$LAB/bin/crio" --version 2>&1 | awk 'NR == 1 { print $3 }') || fail "crio --version"
	[[ -n "$server" ]] || fail "crio --version: no version"
	ok "CRI-O $server on $SOCK (crio --version)"
else
	server=$(ctr -a "$SOCK" version 2>&1 | awk '/^Server:/ { s = 1 } s && /Version:/ { print $2; exit }') ||
		fail "ctr version"
	[[ -n "$server" ]] || fail "ctr version: no server version"
	ok "containerd answers on $SOCK (server $server)"

	plugin=$(ctr -a "$SOCK" plugins ls | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
	[[ "$plugin" == ok ]] || fail "CRI plugin status '$plugin'"
	ok "CRI plugin loaded"

	images=$(ctr_ images ls -q)
	for image in localhost/pause:edge localhost/busybox:edge; do
		grep -qxF "$image" <<<"$images" || fail "ctr images ls: $image missing"
	done
	ok "ctr images ls: localhost/pause:edge localhost/busybox:edge"
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
	grep -q "^RuntimeName: *$RUNTIME_NAME\$" <<<"$cv" || fail "crictl version: $cv"
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
[[ -z "$(runtime_containers)" ]] || fail "containers left after RemovePodSandbox: $(runtime_containers | tr '\n' ' ')"
left=$(awk -v lab="$LAB/" 'index($5, lab) == 1' /proc/self/mountinfo | wc -l)
[[ "$left" -le "$mounts_before" ]] || fail "$((left - mounts_before)) mount(s) left under $LAB after RemovePodSandbox"
rm -rf "$LAB/smoke-logs"
ok "pod removed: no container, no mount left"

printf 'smoke: %d checks passed in %s s\n' "$checks" "$(awk -v a="$t0" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.2f", b - a }')"
