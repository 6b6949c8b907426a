#!/usr/bin/env bash
# picolet beside the upstream kubelet in cluster mode: what an idle node
# costs the control plane (tests/cluster/: etcd, kube-apiserver, controller-manager and
# scheduler of the pinned Kubernetes version, on 127.0.0.1).
#
#   sudo benches/kubelet_cluster.sh [--picolet BIN] [--pods 10] [--secs 300] [--settle 60]
#                                   [--rounds 1] [--fleet 50] [--fleet-secs 300] [--only one|fleet]
#                                   [--fleet-kinds hollow,picolet]
#
# one    a baseline window with no node, then one node at a time, alternated (kubelet,
#        picolet, kubelet, ... for --rounds): the node joins with a client certificate of the
#        cluster CA, a Deployment of PODS busybox pods pinned to it runs, SETTLE s, then SECS
#        measured: its requests by verb and resource (the apiserver's audit log, user
#        system:node:NAME), apiserver_request_total over the window less the baseline's (all
#        clients: what the node adds), the watches it holds (apiserver_longrunning_requests
#        WATCH, less the baseline's), the apiserver's CPU and RSS.
# fleet  a baseline window, then FLEET kubemark hollow nodes (k8s.io/kubernetes/cmd/kubemark,
#        --morph=kubelet: the kubelet's code on a fake runtime and fake image service), then
#        FLEET picolets (on the lab's containerd, no pods: an idle node), each window
#        FLEET_SECS after every node is Ready and SETTLE s: the apiserver's (and etcd's) CPU
#        over the window and RSS at its end, per node = (fleet − baseline) ÷ FLEET.
#
# Every node runs in its own network and mount namespace (unshare -m -n): loopback, a
# veth pair (no dummy module here) with an address of the lab's subnet (.100 up) as its default
# route (the node's InternalIP; nothing is behind it), and socat forwarding its
# 127.0.0.1:APISERVER_PORT to one unix socket that a socat outside forwards to the apiserver. So each node's ports (10250, 10248, ...) are its
# own, the kubelet's host sysctls and fixed paths stay in the namespace (see benches/kubelet.sh),
# and every node reaches the apiserver the same way. The nodes' root directories are shared
# mounts, so the volumes a node mounts there reach containerd's (the host's) view.
# Lab resources as benches/kubelet.sh (KBENCH_DIR=/tmp/kbench, bridge picokb, 10.88.133.0/24,
# cgroup roots /kubelet-kbench and /picolet-kbench); the control plane takes free ports
# (tests/cluster/cluster.sh). Results: KBENCH_DIR/out-cluster/results.tsv and one.md.
set -euo pipefail
shopt -s inherit_errexit

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
D=${KBENCH_DIR:-/tmp/kbench}
OUT=$D/out-cluster
LAB=$D/lab
CL=$D/cluster
export PICOLET_LAB_BRIDGE=${PICOLET_LAB_BRIDGE:-picokb}
export PICOLET_LAB_SUBNET=${PICOLET_LAB_SUBNET:-10.88.133.0/24}
NET=${PICOLET_LAB_SUBNET%.*}
K_CGROUP=kubelet-kbench P_CGROUP=picolet-kbench

picolet=${CARGO_TARGET_DIR:-$REPO/target}/release/picolet
pods=10 secs=300 settle=60 rounds=1 fleet=50 fleet_secs=300 only="" fleet_kinds=hollow,picolet
while (($#)); do
	case "$1" in
	--picolet) picolet=$2; shift ;;
	--pods) pods=$2; shift ;;
	--secs) secs=$2; shift ;;
	--settle) settle=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--fleet) fleet=$2; shift ;;
	--fleet-secs) fleet_secs=$2; shift ;;
	--only) only=$2; shift ;;
	--fleet-kinds) fleet_kinds=$2; shift ;;
	-h | --help)
		sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "kubelet_cluster.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
[[ $EUID -eq 0 ]] || {
	echo "kubelet_cluster.sh: needs root" >&2
	exit 1
}
picolet=$(realpath "$picolet")
command -v socat >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq socat >&2

log() { printf 'kubelet_cluster.sh %s: %s\n' "$(date +%T)" "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
add() { # AGENT NODES METRIC VALUE [NOTE]
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "$(load)" >>"$OUT/results.tsv"
	log "$1 $2: $3 = $4 ${5:-}"
}

kubelet=$(tests/upstream/build.sh --path kubelet)
kubemark=$(tests/upstream/build.sh --path kubemark)
crictl=$(tests/upstream/build.sh --path crictl)
mkdir -p "$OUT/logs"
[[ -f $OUT/results.tsv ]] && mv "$OUT/results.tsv" "$OUT/results.$(date +%s).tsv"
: >"$OUT/results.tsv"
: >"$OUT/one.md"
touch "$D/.t0"

declare -a PGIDS=()
lab_up=0 cluster_up=0 fwd_pid=""
stop_nodes() {
	local g i
	for g in "${PGIDS[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
	for ((i = 0; i < 100; i++)); do
		local alive=0
		for g in "${PGIDS[@]}"; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.1
	done
	for g in "${PGIDS[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
	for g in "${PGIDS[@]}"; do wait "$g" 2>/dev/null || true; done
	PGIDS=()
	if ((lab_up)); then
		cri rmp -fa >/dev/null 2>&1 || true
		cri rm -fa >/dev/null 2>&1 || true
	fi
	local f
	for f in "$D"/nodes/*/agent.log; do [[ -f $f ]] && cp "$f" "$OUT/logs/$(basename "$(dirname "$f")").log"; done
	# Mounts under the nodes' directories (the shared root binds, volumes), deepest first.
	awk -v d="$D/nodes/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r mp; do
		umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
	done
	rm -rf --one-file-system "$D/nodes"
	# The hollow kubelets' fake runtime sockets (cri-client's fake: /tmp/kubelet_remote_N.sock).
	find /tmp -maxdepth 1 -name 'kubelet_remote_*.sock' -newer "$D/.t0" -delete 2>/dev/null || true
	local c
	((lab_up)) || return 0 # hollow nodes only: they made no cgroup
	for c in /sys/fs/cgroup/*/"$P_CGROUP" /sys/fs/cgroup/*/"$K_CGROUP"; do
		[[ -d $c ]] || continue
		find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || log "cgroup $c not empty"
	done
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local rc=$?
	set +e
	stop_nodes
	[[ -z $fwd_pid ]] || kill "$fwd_pid" 2>/dev/null
	rm -f "$D/api.sock"
	if ((lab_up)); then tests/e2e/lab.sh down "$LAB" >>"$OUT/logs/lab.log" 2>&1 || log "lab down failed"; fi
	if ((cluster_up)); then
		[[ -f $CL/logs/audit.log ]] && cp "$CL/logs/kube-apiserver.log" "$OUT/logs/" 2>/dev/null
		tests/cluster/cluster.sh down "$CL" >>"$OUT/logs/cluster.log" 2>&1 || log "cluster down failed"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cri() { "$crictl" --config "$D/crictl.yaml" --runtime-endpoint "unix://$LAB/containerd.sock" --image-endpoint "unix://$LAB/containerd.sock" "$@"; }
echo "timeout: 20" >"$D/crictl.yaml"

log "control plane: tests/cluster/cluster.sh up $CL"
cluster_up=1
tests/cluster/cluster.sh up "$CL" >"$OUT/logs/cluster-up.log" 2>&1 || {
	tail -n 20 "$OUT/logs/cluster-up.log" >&2
	exit 1
}
# shellcheck disable=SC1091
. "$CL/env"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
APID=$(cat "$CL/pids/kube-apiserver.pid")
EPID=$(cat "$CL/pids/etcd.pid")
# The lab's containerd, unless only hollow nodes run (they have their own fake runtime).
EP=""
if [[ $only != fleet || $fleet_kinds != hollow ]]; then
	log "lab: tests/e2e/lab.sh up $LAB"
	lab_up=1
	EP=$(tests/e2e/lab.sh up "$LAB" 2>"$OUT/logs/lab-up.log" | tail -n 1) || {
		cat "$OUT/logs/lab-up.log" >&2
		exit 1
	}
fi
rm -f "$D/api.sock"
socat "UNIX-LISTEN:$D/api.sock,fork,mode=600" "TCP:127.0.0.1:$APISERVER_PORT" &
fwd_pid=$!
{
	echo "- date: $(date -u +%FT%TZ); uptime: $(uptime)"
	echo "- Kubernetes $KUBERNETES_VERSION (tests/cluster/cluster.sh), kubelet $("$kubelet" --version), kubemark $kubemark"
	echo "- picolet: $picolet ($(git rev-parse --short HEAD))"
	echo "- pods $pods, window $secs s, settle $settle s, rounds $rounds, fleet $fleet, fleet window $fleet_secs s"
} >"$OUT/machine.md"
cat "$OUT/machine.md" >&2

# sign NAME DIR: a client certificate of the cluster CA for system:node:NAME, and a kubeconfig.
sign() {
	local n=$1 d=$2
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/node.key" 2>/dev/null
	openssl req -new -key "$d/node.key" -subj "/O=system:nodes/CN=system:node:$n" -out "$d/node.csr" 2>/dev/null
	printf 'extendedKeyUsage=clientAuth\n' >"$d/node.ext"
	openssl x509 -req -in "$d/node.csr" -CA "$CLUSTER_CA" -CAkey "$CL/pki/ca.key" -CAcreateserial \
		-days 2 -extfile "$d/node.ext" -out "$d/node.crt" 2>/dev/null
	cat >"$d/kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters: [{name: lab, cluster: {server: "$APISERVER_URL", certificate-authority: "$CLUSTER_CA"}}]
		users: [{name: node, user: {client-certificate: "$d/node.crt", client-key: "$d/node.key"}}]
		contexts: [{name: node, context: {cluster: lab, user: node}}]
		current-context: node
	EOF
	chmod 600 "$d/kubeconfig" "$d/node.key"
}

# The namespace every node runs in (see the header). $1: the node's address.
ns_script() {
	local d=$1 ip=$2
	cat <<EOF
set -e
ip link set lo up
ip link add kb0 type veth peer name kb1
ip addr add $ip/32 dev kb0
ip link set kb1 up
ip link set kb0 up
ip route add default dev kb0
mount -t tmpfs -o size=1m kbench /var/lib
mkdir /var/lib/kubelet
mount --bind $d/var-lib-kubelet /var/lib/kubelet
mount --bind $d/var-log /var/log
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1; do
	k=\${kv%%=*}; f=$d/sysctl-\${k//\//.}
	echo "\${kv#*=}" >"\$f"
	mount --bind "\$f" "/proc/sys/\$k"
done
socat TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:$D/api.sock &
for i in \$(seq 50); do [ -n "\$(ss -Hltn "sport = :$APISERVER_PORT")" ] && break; sleep 0.1; done
exec "\$@"
EOF
}

# start_node KIND NAME IP: kubelet | picolet | hollow, in its namespace; its pid is the
# process group to stop.
start_node() {
	local kind=$1 n=$2 ip=$3 d=$D/nodes/$2
	mkdir -p "$d"/{manifests,root,logs,var-lib-kubelet,var-log,pki,tmp}
	sign "$n" "$d"
	# The root directory shared: volumes mounted there in the namespace reach the host.
	mount --bind "$d/root" "$d/root"
	mount --make-shared "$d/root"
	ns_script "$d" "$ip" >"$d/ns.sh"
	local cmd=()
	case $kind in
	kubelet)
		local c
		for c in /sys/fs/cgroup/*/; do
			[[ -d $c && ! -L ${c%/} ]] || continue
			mkdir -p "$c$K_CGROUP"
		done
		cat >"$d/config.yaml" <<-EOF
			apiVersion: kubelet.config.k8s.io/v1beta1
			kind: KubeletConfiguration
			staticPodPath: $d/manifests
			containerRuntimeEndpoint: $EP
			cgroupDriver: cgroupfs
			cgroupRoot: /$K_CGROUP
			failCgroupV1: false
			failSwapOn: false
			podLogsDir: $d/logs
			authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $CLUSTER_CA}}
			authorization: {mode: Webhook}
			evictionHard: {memory.available: 100Mi}
			imageGCHighThresholdPercent: 100
			imageGCLowThresholdPercent: 99
		EOF
		cmd=("$kubelet" --config "$d/config.yaml" --kubeconfig "$d/kubeconfig" --root-dir "$d/root"
			--cert-dir "$d/pki" --hostname-override "$n" --node-ip "$ip")
		;;
	picolet)
		cmd=(env RUST_LOG=info "$picolet" run --kubeconfig "$d/kubeconfig" --hostname-override "$n" --node-ip "$ip"
			--pod-manifest-path "$d/manifests" --container-runtime-endpoint "$EP" --root-dir "$d/root"
			--pod-log-dir "$d/logs" --cgroup-root "/$P_CGROUP/$n" --eviction-hard 'memory.available<100Mi'
			--image-gc-high-threshold 100 --client-ca-file "$CLUSTER_CA" --anonymous-auth=false
			--authentication-token-webhook --authorization-mode Webhook)
		;;
	hollow)
		cmd=(env TMPDIR="$d/tmp" "$kubemark" --morph=kubelet --name="$n" --kubeconfig="$d/kubeconfig"
			--cert-dir="$d/pki" --kubelet-read-only-port=0 --use-host-image-service=false)
		;;
	esac
	setsid unshare -m -n --propagation unchanged bash "$d/ns.sh" "${cmd[@]}" </dev/null >"$d/agent.log" 2>&1 &
	PGIDS+=($!)
}

ready_nodes() { k get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l; }
wait_ready() { # N SECS
	local end=$((SECONDS + $2))
	until (($(ready_nodes) >= $1)); do
		((SECONDS < end)) || return 1
		sleep 2
	done
}
delete_nodes() {
	k delete nodes --all --wait=false >/dev/null 2>&1 || true
	k -n kube-node-lease delete leases --all >/dev/null 2>&1 || true
}

requests() { k get --raw /metrics | grep '^apiserver_request_total{' || true; }
# Requests by verb and resource over a window: "count verb resource[/subresource]" per line.
req_delta() {
	join -t $'\t' -a2 -e0 -o 0,1.2,2.2 <(awk '{ print $1 "\t" $2 }' <<<"$1" | sort) <(awk '{ print $1 "\t" $2 }' <<<"$2" | sort) |
		awk -F'\t' '{ d = $3 - $2; if (d <= 0) next
			match($1, /verb="[^"]*"/); v = substr($1, RSTART + 6, RLENGTH - 7)
			match($1, /resource="[^"]*"/); r = substr($1, RSTART + 10, RLENGTH - 11)
			match($1, /subresource="[^"]*"/); s = substr($1, RSTART + 13, RLENGTH - 14)
			if (r == "") r = "(" s ")"; else if (s != "") r = r "/" s
			n[v " " r] += d }
		END { for (k in n) print n[k], k }' | sort -k2
}
watches() { # total WATCH requests open (apiserver_longrunning_requests)
	k get --raw /metrics | awk '/^apiserver_longrunning_requests\{/ && /verb="WATCH"/ { n += $NF } END { print n + 0 }'
}
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# window NAME SECS: the apiserver's and etcd's CPU, RSS, requests, watches over SECS.
declare -A W
window() {
	local name=$1 s=$2 m0 m1 a0 a1 e0 e1
	W[load]=$(load)
	W[t0]=$(date -u +%FT%T.000000Z)
	m0=$(requests) a0=$(ticks "$APID") e0=$(ticks "$EPID")
	log "window $name: $s s (load ${W[load]})"
	sleep "$s"
	m1=$(requests) a1=$(ticks "$APID") e1=$(ticks "$EPID")
	W[t1]=$(date -u +%FT%T.000000Z)
	W[req]=$(req_delta "$m0" "$m1")
	W[reqtotal]=$(awk '{ n += $1 } END { print n + 0 }' <<<"${W[req]}")
	W[cpu]=$(awk -v t=$((a1 - a0)) -v s="$s" 'BEGIN { printf "%.3f", t / s }')
	W[ecpu]=$(awk -v t=$((e1 - e0)) -v s="$s" 'BEGIN { printf "%.3f", t / s }')
	W[rss]=$(rss "$APID")
	W[erss]=$(rss "$EPID")
	W[watches]=$(watches)
	echo "${W[req]}" >"$OUT/req-$name.txt"
}

# --- one node at a time -------------------------------------------------------------------------
deployment() { # NAME NODE
	cat <<-EOF
		apiVersion: apps/v1
		kind: Deployment
		metadata: {name: $1, namespace: default}
		spec:
		  replicas: $pods
		  selector: {matchLabels: {app: $1}}
		  template:
		    metadata: {labels: {app: $1}}
		    spec:
		      nodeSelector: {kubernetes.io/hostname: $2}
		      terminationGracePeriodSeconds: 2
		      containers:
		      - name: app
		        image: localhost/busybox:edge
		        imagePullPolicy: IfNotPresent
		        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
	EOF
}
available() { [[ $(k get deploy "$1" -o 'jsonpath={.status.availableReplicas}' 2>/dev/null) == "$pods" ]]; }

one() { # KIND ROUND
	local kind=$1 n ip=$NET.100
	n=kbench-${kind:0:1}
	start_node "$kind" "$n" "$ip"
	wait_ready 1 180 || {
		add "$kind" 1 error FAILED "not Ready in 180 s: $(tail -n 3 "$D/nodes/$n/agent.log")"
		stop_nodes
		delete_nodes
		return 0
	}
	deployment "idle-$n" "$n" | k apply -f - >/dev/null
	local end=$((SECONDS + 300))
	until available "idle-$n"; do
		((SECONDS < end)) || break
		sleep 2
	done
	available "idle-$n" || add "$kind" 1 error "not all available" "$(k get deploy "idle-$n" --no-headers)"
	sleep "$settle"
	window "$kind-$2" "$secs"
	local pid
	pid=${PGIDS[0]}
	add "$kind" 1 "agent RSS" "$(rss "$pid")" "kB, $pods pods (cluster mode)"
	add "$kind" 1 "requests/s (apiserver_request_total, less baseline)" \
		"$(awk -v a="${W[reqtotal]}" -v b="${BASE[reqtotal]}" -v s="$secs" 'BEGIN { printf "%.3f", (a - b) / s }')" \
		"all clients: ${W[reqtotal]} in the window, baseline ${BASE[reqtotal]}"
	add "$kind" 1 "watches held (less baseline)" "$((W[watches] - BASE[watches]))" "apiserver_longrunning_requests WATCH: ${W[watches]}, baseline ${BASE[watches]}"
	add "$kind" 1 "apiserver CPU (less baseline)" "$(awk -v a="${W[cpu]}" -v b="${BASE[cpu]}" 'BEGIN { printf "%.3f", a - b }')" "% of a core: ${W[cpu]} with the node, ${BASE[cpu]} baseline"
	local audit
	audit=$(python3 tests/cluster/audit.py "$CL/logs/audit.log" "system:node:$n" --since "${W[t0]}" --until "${W[t1]}")
	add "$kind" 1 "requests/s (audit log, system:node:$n)" "$(awk -F'\t' -v s="$secs" '{ n += $1 } END { printf "%.3f", n / s }' <<<"$audit")" ""
	{
		echo "#### $kind (node $n), round $2: $pods pods, $secs s (${W[t0]} – ${W[t1]}), load ${W[load]}"
		echo
		echo "Requests of system:node:$n (audit log), per minute, by verb and resource:"
		echo
		awk -F'\t' -v s="$secs" '{ printf "    %6.2f  %s %s\n", $1 * 60 / s, $2, $3 }' <<<"$audit"
		echo
		echo "apiserver_request_total over the window (all clients), per minute, with this node | baseline:"
		echo
		join -1 2 -2 2 -a1 -a2 -e0 -o 0,1.1,2.1 <(awk '{ print $1, $2 "_" $3 }' <<<"${W[req]}" | sort -k2) \
			<(awk '{ print $1, $2 "_" $3 }' <<<"${BASE[req]}" | sort -k2) |
			awk -v s="$secs" '{ printf "    %6.2f | %6.2f  %s\n", $2 * 60 / s, $3 * 60 / s, $1 }' | sed 's/_/ /'
		echo
		echo "Watches it opened over the run (audit log):"
		echo
		python3 tests/cluster/audit.py "$CL/logs/audit.log" "system:node:$n" --watches | sed 's/^/    /'
		echo
	} >>"$OUT/one.md"
	k delete deploy "idle-$n" --wait=false >/dev/null
	stop_nodes
	delete_nodes
	sleep 10
}

declare -A BASE
baseline() {
	window "baseline-$1" "$2"
	local key
	for key in "${!W[@]}"; do BASE[$key]=${W[$key]}; done
	add baseline 0 "apiserver CPU" "${BASE[cpu]}" "% of a core, no node ($1)"
	add baseline 0 "apiserver RSS" "${BASE[rss]}" "kB"
	add baseline 0 "etcd CPU" "${BASE[ecpu]}" "% of a core"
	add baseline 0 "requests/s" "$(awk -v a="${BASE[reqtotal]}" -v s="$2" 'BEGIN { printf "%.3f", a / s }')" "all clients"
	add baseline 0 "watches" "${BASE[watches]}" ""
}

if [[ -z $only || $only == one ]]; then
	sleep "$settle"
	baseline one "$secs"
	i=0
	for ((r = 1; r <= rounds; r++)); do
		if ((i % 2 == 0)); then order=(kubelet picolet); else order=(picolet kubelet); fi
		for a in "${order[@]}"; do one "$a" "$r"; done
		i=$((i + 1))
	done
fi

# --- the fleet ----------------------------------------------------------------------------------
fleet_run() { # KIND
	local kind=$1 j t0
	t0=$SECONDS
	for ((j = 0; j < fleet; j++)); do
		start_node "$kind" "kbench-${kind:0:1}$j" "$NET.$((100 + j))"
		sleep 0.5
	done
	if ! wait_ready "$fleet" 600; then
		add "$kind" "$fleet" error "only $(ready_nodes) Ready after 600 s" ""
	fi
	add "$kind" "$fleet" "nodes Ready" "$(ready_nodes)" "after $((SECONDS - t0)) s"
	sleep "$settle"
	window "fleet-$kind" "$fleet_secs"
	local nr
	nr=$(ready_nodes)
	add "$kind" "$nr" "apiserver CPU per node" "$(awk -v a="${W[cpu]}" -v b="${BASE[cpu]}" -v n="$nr" 'BEGIN { printf "%.4f", (a - b) / n }')" "% of a core: ${W[cpu]} with $nr nodes, ${BASE[cpu]} baseline"
	add "$kind" "$nr" "apiserver RSS per node" "$(awk -v a="${W[rss]}" -v b="${BASE[rss]}" -v n="$nr" 'BEGIN { printf "%.0f", (a - b) / n }')" "kB: ${W[rss]} with $nr nodes, ${BASE[rss]} baseline"
	add "$kind" "$nr" "etcd CPU per node" "$(awk -v a="${W[ecpu]}" -v b="${BASE[ecpu]}" -v n="$nr" 'BEGIN { printf "%.4f", (a - b) / n }')" "% of a core: ${W[ecpu]}, baseline ${BASE[ecpu]}"
	add "$kind" "$nr" "requests/s per node" "$(awk -v a="${W[reqtotal]}" -v b="${BASE[reqtotal]}" -v n="$nr" -v s="$fleet_secs" 'BEGIN { printf "%.3f", (a - b) / n / s }')" "apiserver_request_total, all clients, less baseline"
	add "$kind" "$nr" "watches per node" "$(awk -v a="${W[watches]}" -v b="${BASE[watches]}" -v n="$nr" 'BEGIN { printf "%.2f", (a - b) / n }')" ""
	local mem=0 g
	for g in "${PGIDS[@]}"; do mem=$((mem + $(rss "$g" 2>/dev/null || echo 0))); done
	add "$kind" "$nr" "node RSS, mean" "$((mem / ${#PGIDS[@]}))" "kB (the agent process; socat not counted)"
	stop_nodes
	delete_nodes
	sleep 30
}
if [[ -z $only || $only == fleet ]]; then
	baseline fleet "$fleet_secs"
	for kind in ${fleet_kinds//,/ }; do fleet_run "$kind"; done
fi
echo "- end: $(date -u +%FT%TZ); uptime: $(uptime)" >>"$OUT/machine.md"
cat "$OUT/one.md"
