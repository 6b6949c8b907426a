#!/usr/bin/env bash
# CRI calls picolet makes to start N pods at once, per method, from its own /metrics
# (kubelet_runtime_operations_total), read with kubectl through picolet's node API.
#
#   benches/cri_calls.sh PICOLET_BINARY ENDPOINT [N]     (as root; N defaults to 20)
#
# ENDPOINT is a running containerd with the bench image localhost/busybox:edge
# (tests/e2e/lab.sh up DIR prints one). picolet runs with its own root directory, node API
# port 10277 and cgroup root /picolet-cri-calls; the pods are removed again at the end.
set -euo pipefail

BIN=$1 ENDPOINT=$2 N=${3:-20}
D=$(mktemp -d /tmp/picolet-cri-calls.XXXXXX)
mkdir -p "$D/manifests" "$D/root"
"$BIN" --pod-manifest-path "$D/manifests" --root-dir "$D/root" \
	--container-runtime-endpoint "$ENDPOINT" --port 10277 --cgroup-root /picolet-cri-calls \
	--hostname-override cri-calls >"$D/log" 2>&1 &
pid=$!
cleanup() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$D"
}
trap cleanup EXIT
k() { kubectl --kubeconfig "$D/root/kubeconfig" "$@"; }
for _ in $(seq 1 100); do
	k get --raw /healthz >/dev/null 2>&1 && break
	sleep 0.1
done
for i in $(seq 0 $((N - 1))); do
	cat >"$D/manifests/.p$i.part" <<Y
apiVersion: v1
kind: Pod
metadata:
  name: cri-calls-$i
  namespace: picolet-bench
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: localhost/busybox:edge
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c"]
    args: ["trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
Y
	mv "$D/manifests/.p$i.part" "$D/manifests/p$i.yaml"
done
running=0
for _ in $(seq 1 120); do
	running=$(k get pods -A --no-headers 2>/dev/null | grep -c Running || true)
	[[ $running == "$N" ]] && break
	sleep 0.5
done
echo "cri_calls: $running of $N pods running"
k get --raw /metrics | awk -v n="$N" '
	/^kubelet_runtime_operations_total/ {
		split($1, a, "\""); total += $2
		printf "%-22s %5d  %.2f per pod\n", a[2], $2, $2 / n
	}
	END { printf "%-22s %5d  %.2f per pod\n", "all", total, total / n }'
rm -f "$D"/manifests/*.yaml
for _ in $(seq 1 120); do
	[[ $(k get pods -A --no-headers 2>/dev/null | wc -l) == 0 ]] && break
	sleep 0.5
done
sleep 3 # the sandboxes are stopped and removed after the API objects are gone
