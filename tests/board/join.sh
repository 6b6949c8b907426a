#!/usr/bin/env bash
# The emulated board — cgroup v2, Debian's kernel and containerd — joined to the real control
# plane on the host, for what needs both (swap for pods, in-place resize on cgroup
# v2), as root:
#
#   tests/board/join.sh [DIR]           (DIR defaults to $BOARD_DIR, else /tmp/board)
#
# The control plane (tests/cluster/cluster.sh, in DIR/cluster, its apiserver certificate also
# for 10.0.2.100) runs on the host; the board, whose user-mode network reaches nothing else,
# gets to it through one qemu guestfwd (10.0.2.100:PORT → socat → 127.0.0.1:PORT). The board
# gets a 256 MiB swap file, picolet's arm64 package (PICOLET_DEB, else built as smoke.sh does)
# with `memorySwap.swapBehavior: LimitedSwap`, and joins with a bootstrap token. Checks, on
# lasting evidence (objects, cgroup files, the journal; never timings):
#   1. the Node's nodeInfo.swap.capacity is the board's SwapTotal;
#   2. a Burstable pod's container gets memory.swap.max = request / MemTotal × SwapTotal
#      (the kubelet's formula, computed here from the guest's /proc/meminfo), a Guaranteed
#      pod's and a static pod's (critical) get 0;
#   3. the Burstable container fills a Memory emptyDir beyond its memory limit and keeps
#      running: its pages went to swap (memory.swap.current > 0), no OOM kill;
#   4. a resize of its memory request is PodResizePending/Infeasible "In-place resize of
#      containers with swap is not supported.";
#   5. the kernel (6.1) has no tmpfs noswap: picolet says memory-backed volumes may be swapped;
#   6. in-place resize on cgroup v2: the Guaranteed pod resized (cpu 100m → 200m, memory
#      64Mi → 96Mi) runs on with the same container, its container's and its pod cgroup's
#      cpu.max and memory.max changed (picolet writes the pod cgroup's v2 files itself);
#   7. failSwapOn: true → picolet refuses to start, with the kubelet's message; back to false,
#      it starts again and the containers are the same (no restart).
# Ends with "board-join: N passed, N failed"; the board is powered off and the control plane
# stopped at the end (BOARD_KEEP=1 keeps both).
# The guest's commands are single-quoted on purpose: they expand in the guest's shell.
# shellcheck disable=SC2016
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
BOARD="$SCRIPT_DIR/board.sh"
DIR=${1:-${BOARD_DIR:-/tmp/board}}
export BOARD_DIR="$DIR"
CLUSTER="$DIR/cluster"
NODE=board
HOST_IP=10.0.2.100
TIMEOUT=${BOARD_POD_TIMEOUT:-600}

log() { printf '==> board-join: %s\n' "$*" >&2; }
# shellcheck source=tests/board/checks.sh
. "$SCRIPT_DIR/checks.sh"
# until_ok SECONDS CMD...: CMD succeeds within SECONDS (polled every 5 s).
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS < end)) || return 1
		sleep 5
	done
}

finish() {
	local rc=$?
	if [ "${BOARD_KEEP:-0}" != 1 ]; then
		"$BOARD" down "$DIR" >/dev/null 2>&1 || true
		"$REPO/tests/cluster/cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
	fi
	echo "board-join: $passed passed, $failed failed"
	((failed == 0 && rc == 0)) || exit 1
}
trap finish EXIT

command -v socat >/dev/null || {
	log "apt-get install socat"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq socat >/dev/null
}

# ---- the package, the board, the control plane -------------------------------------------
"$BOARD" build "$DIR"
deb=$(arm64_deb)
[ -f "$deb" ] || {
	fail "no package $deb"
	exit 1
}

"$BOARD" down "$DIR" >/dev/null 2>&1 || true
"$REPO/tests/cluster/cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
PICOLET_CLUSTER_APISERVER_SANS="IP:$HOST_IP" "$REPO/tests/cluster/cluster.sh" up "$CLUSTER" >&2
eval "$("$REPO/tests/cluster/cluster.sh" env "$CLUSTER")"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

BOARD_GUESTFWD="tcp:$HOST_IP:$APISERVER_PORT-cmd:socat%20-%20TCP:127.0.0.1:$APISERVER_PORT" \
	"$BOARD" up "$DIR"
check "cgroup v2 on the board" g '[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]'
check "a 256 MiB swap file on" g 'fallocate -l 256M /swapfile && chmod 600 /swapfile &&
	mkswap /swapfile >/dev/null && swapon /swapfile && grep -q "^/swapfile" /proc/swaps'
check "the board reaches the apiserver's port through the guestfwd" \
	g "timeout 20 bash -c '</dev/tcp/$HOST_IP/$APISERVER_PORT'"

"$BOARD" copy-in "$deb" /root/picolet.deb "$DIR"
check "dpkg -i picolet" g 'dpkg -i /root/picolet.deb >/dev/null && systemctl stop picolet'
check "images imported" "$BOARD" images "$DIR"
sed "s#server: .*#server: https://$HOST_IP:$APISERVER_PORT#" "$BOOTSTRAP_KUBECONFIG" >"$DIR/bootstrap-kubeconfig"
"$BOARD" copy-in "$DIR/bootstrap-kubeconfig" /etc/picolet/bootstrap-kubeconfig "$DIR"
g 'cat >>/etc/picolet/config.yaml <<EOF0
kubeconfig: /var/lib/picolet/kubelet.conf
failSwapOn: false
memorySwap:
  swapBehavior: LimitedSwap
EOF0
mkdir -p /etc/systemd/system/picolet.service.d /etc/kubernetes/manifests
cat >/etc/systemd/system/picolet.service.d/join.conf <<EOF0
[Service]
ExecStart=
ExecStart=/usr/bin/picolet run --config /etc/picolet/config.yaml --bootstrap-kubeconfig /etc/picolet/bootstrap-kubeconfig --hostname-override board
EOF0
cat >/etc/kubernetes/manifests/static-swap.yaml <<EOF0
apiVersion: v1
kind: Pod
metadata: {name: static-swap, namespace: default}
spec:
  containers:
  - name: c
    image: localhost/busybox:edge
    imagePullPolicy: Never
    command: [sleep, "100000"]
    resources: {requests: {memory: 32Mi}, limits: {memory: 128Mi}}
EOF0
systemctl daemon-reload && systemctl start picolet'

node_ready() {
	[ "$(k get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
check "the board's Node Ready (joined by bootstrap token)" until_ok "$TIMEOUT" node_ready
swap_total=$(g 'awk "/^SwapTotal:/ {print \$2 * 1024}" /proc/meminfo')
mem_total=$(g 'awk "/^MemTotal:/ {print \$2 * 1024}" /proc/meminfo')
log "board: MemTotal $mem_total B, SwapTotal $swap_total B"
check "nodeInfo.swap.capacity = SwapTotal ($swap_total)" \
	[ "$(k get node "$NODE" -o 'jsonpath={.status.nodeInfo.swap.capacity}')" = "$swap_total" ]

k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: burst}
spec:
  nodeName: $NODE
  containers:
  - name: c
    image: localhost/busybox:edge
    imagePullPolicy: Never
    # 2 × 70 MiB into Memory emptyDirs (each at most the 128 MiB limit in size) under a
    # 128 MiB limit: only swap keeps it alive.
    command: [sh, -c, 'head -c 73400320 /dev/zero > /a/zeros && head -c 73400320 /dev/zero > /b/zeros && echo filled && exec sleep 100000']
    resources: {requests: {memory: 100Mi}, limits: {memory: 128Mi}}
    volumeMounts: [{name: a, mountPath: /a}, {name: b, mountPath: /b}]
  volumes:
  - {name: a, emptyDir: {medium: Memory}}
  - {name: b, emptyDir: {medium: Memory}}
---
apiVersion: v1
kind: Pod
metadata: {name: guar}
spec:
  nodeName: $NODE
  containers:
  - name: c
    image: localhost/busybox:edge
    imagePullPolicy: Never
    command: [sleep, "100000"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
EOF
running() {
	[ "$(k get pod "$1" -o 'jsonpath={.status.containerStatuses[0].state.running.startedAt}')" != "" ]
}
check "pod burst runs" until_ok "$TIMEOUT" running burst
check "pod guar runs" until_ok "$TIMEOUT" running guar
check "static pod runs (its mirror pod)" until_ok "$TIMEOUT" running static-swap-$NODE

# cgroup FILE of pod POD's container: the container's cgroup directory on the board.
cgroup_file() {
	local cid
	cid=$(k get pod "$1" -o 'jsonpath={.status.containerStatuses[0].containerID}')
	cid=${cid#*://}
	[ -n "$cid" ] || return 1
	g "cat \$(find /sys/fs/cgroup/kubepods -type d -name '$cid' | head -n 1)/$2"
}
# picolet asks for request / MemTotal × SwapTotal bytes; the kernel keeps whole pages.
page=$(g 'getconf PAGESIZE')
want=$(awk -v r=$((100 << 20)) -v m="$mem_total" -v s="$swap_total" -v p="$page" \
	'BEGIN { b = int(r / m * s); printf "%d", b - b % p }')
check "burst (Burstable, 100Mi of the node's memory): memory.swap.max $want" \
	[ "$(cgroup_file burst memory.swap.max)" = "$want" ]
check "guar (Guaranteed): memory.swap.max 0" [ "$(cgroup_file guar memory.swap.max)" = 0 ]
check "static-swap (critical): memory.swap.max 0" [ "$(cgroup_file "static-swap-$NODE" memory.swap.max)" = 0 ]
# (the apiserver cannot reach the board's node API: the log file, on the board)
filled() { g 'grep -q filled /var/log/pods/default_burst_*/c/0.log'; }
check "burst filled 140 MiB under its 128 MiB limit" until_ok "$TIMEOUT" filled
check "burst still running, never restarted (no OOM kill)" \
	[ "$(k get pod burst -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0 ]
check "burst's pages went to swap (memory.swap.current > 0)" \
	[ "$(cgroup_file burst memory.swap.current)" -gt 0 ]

k patch pod burst --subresource resize --type strategic \
	-p '{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"110Mi"}}}]}}' >/dev/null
infeasible() {
	k get pod burst -o 'jsonpath={.status.conditions[?(@.type=="PodResizePending")].reason} {.status.conditions[?(@.type=="PodResizePending")].message}' |
		grep -qx 'Infeasible In-place resize of containers with swap is not supported.'
}
check "a memory-request resize of burst: Infeasible (swap)" until_ok 120 infeasible

check "picolet says memory-backed volumes may be swapped (kernel 6.1: no tmpfs noswap)" \
	g 'journalctl -u picolet --no-pager | grep -q "tmpfs noswap option is not supported"'

# In-place resize on cgroup v2 (the pod is Guaranteed: it never swaps, so it may resize).
gcid=$(k get pod guar -o 'jsonpath={.status.containerStatuses[0].containerID}')
k patch pod guar --subresource resize --type strategic \
	-p '{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"96Mi"},"limits":{"cpu":"200m","memory":"96Mi"}}}]}}' >/dev/null
resized() {
	[ "$(k get pod guar -o 'jsonpath={.status.containerStatuses[0].resources.limits.memory} {.status.conditions[?(@.type=="PodResizeInProgress")].status}')" = "96Mi " ]
}
check "guar resized in place (status: 96Mi, no PodResizeInProgress)" until_ok "$TIMEOUT" resized
check "guar: the same container, no restart" \
	[ "$(k get pod guar -o 'jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')" = "$gcid 0" ]
check "guar's container cgroup: memory.max 96Mi, cpu.max 20 ms per 100 ms" \
	[ "$(cgroup_file guar memory.max) $(cgroup_file guar cpu.max)" = "100663296 20000 100000" ]
check "guar's pod cgroup: memory.max 96Mi, cpu.max 20 ms per 100 ms" \
	[ "$(cgroup_file guar ../memory.max) $(cgroup_file guar ../cpu.max)" = "100663296 20000 100000" ]

cid0=$(k get pod burst -o 'jsonpath={.status.containerStatuses[0].containerID}')
g 'sed -i "s/^failSwapOn: false/failSwapOn: true/" /etc/picolet/config.yaml && systemctl restart picolet' || true
refused() { g 'journalctl -u picolet --no-pager | grep -q "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"'; }
check "failSwapOn: true with swap on: picolet refuses to start" until_ok 120 refused
g 'sed -i "s/^failSwapOn: true/failSwapOn: false/" /etc/picolet/config.yaml && systemctl reset-failed picolet; systemctl restart picolet'
active() { g 'systemctl is-active picolet'; }
check "failSwapOn: false again: picolet active" until_ok 300 active
check "the Node Ready again" until_ok "$TIMEOUT" node_ready
check "burst's container untouched by the restarts" \
	[ "$(k get pod burst -o 'jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')" = "$cid0 0" ]
