#!/usr/bin/env bash
# The node API behind the apiserver, for real: picolet joins the control
# plane of tests/cluster/cluster.sh with a node client certificate this script signs with the
# cluster CA (CN=system:node:$NODE, O=system:nodes; no TLS bootstrap), serves its node API
# with a serving certificate of the same CA (the apiserver runs with
# --kubelet-certificate-authority), trusts the apiserver's kubelet-client certificate
# (--client-ca-file = the cluster CA) and checks everyone else with TokenReview and
# SubjectAccessReview (--authentication-token-webhook, --authorization-mode=Webhook).
#
#   tests/cluster/node-api.sh [CLUSTER_DIR] [LAB_DIR]      (root: the lab's containerd)
#
# Then, through the apiserver with the admin kubeconfig: kubectl logs, logs -f, exec with
# stdin, port-forward (curl through it), get --raw …/nodes/$NODE/proxy/stats/summary; and
# directly at the node API: no credentials → 401, a bad token → 401, a service account's
# token without RBAC → 403, one bound to system:kubelet-api-admin → 200; no token in
# picolet's log. A cluster or lab this script started is taken down at the end (one that
# was already up is left up); the pod, picolet and the work directory always go.
# A shared test machine's disk may be fuller than the kubelet's thresholds: eviction and image
# GC are set low (not under test here).
# Env: PICOLET_BIN (default target/debug/picolet, or $CARGO_TARGET_DIR/debug/picolet),
# PICOLET_LAB_BRIDGE/PICOLET_LAB_SUBNET (the lab's), NODE (authz-node), NODE_PORT (10362).
# Ends "node-api: N passed, N failed".
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
CDIR=${1:-${PICOLET_CLUSTER_DIR:-/tmp/picolet-cluster}}
LAB=${2:-/tmp/picolet-node-api-lab}
NODE=${NODE:-authz-node}
NODE_PORT=${NODE_PORT:-10362}
BRIDGE=${PICOLET_LAB_BRIDGE:-picolet0}
BIN=${PICOLET_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/debug/picolet}
WORK=$LAB/node-api
pass=0 fail=0
ok() { pass=$((pass + 1)); printf 'node-api: ok   %s\n' "$*"; }
bad() { fail=$((fail + 1)); printf 'node-api: FAIL %s\n' "$*"; }
check() { # check WHAT CMD...: ok if CMD succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
[[ -x $BIN ]] || { echo "node-api: no picolet binary at $BIN (cargo build)" >&2; exit 1; }

started_cluster=0 started_lab=0 picolet_pid='' pf_pid=''
if ! "$SCRIPT_DIR/cluster.sh" status "$CDIR" >/dev/null 2>&1; then
	"$SCRIPT_DIR/cluster.sh" up "$CDIR" >&2
	started_cluster=1
fi
eval "$("$SCRIPT_DIR/cluster.sh" env "$CDIR")"
# `lab.sh status` answers 0 for an absent lab too: a running one names its containerd's PID.
if ! "$REPO/tests/e2e/lab.sh" status "$LAB" 2>/dev/null | grep -Eq '^containerd: +[0-9]+'; then
	started_lab=1
fi
endpoint=$("$REPO/tests/e2e/lab.sh" up "$LAB" | tail -n 1)
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

cleanup() {
	set +e
	[[ -n $pf_pid ]] && kill "$pf_pid" 2>/dev/null
	# picolet stops the pod and removes it (its volumes unmounted) before it goes.
	kc delete pod node-api --grace-period=1 --timeout=60s >/dev/null 2>&1
	kc delete sa node-api-nobody node-api-reader >/dev/null 2>&1
	kc delete clusterrolebinding node-api-reader >/dev/null 2>&1
	if [[ -n $picolet_pid ]]; then
		kill "$picolet_pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$picolet_pid" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$picolet_pid" 2>/dev/null
	fi
	kc delete node "$NODE" --wait=false >/dev/null 2>&1
	# Whatever a failed run left mounted under WORK (a pod's token volume).
	awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount 2>/dev/null
	((started_lab)) && "$REPO/tests/e2e/lab.sh" down "$LAB" >&2
	((started_cluster)) && "$SCRIPT_DIR/cluster.sh" down "$CDIR" >&2
	[[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

# ---- PKI: the node's client and serving certificates, signed by the cluster CA.
awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount 2>/dev/null || true
rm -rf "$WORK"
mkdir -p "$WORK/manifests" "$WORK/root"
NODE_IP=$(ip -4 route get 1.1.1.1 | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')
[[ -n $NODE_IP ]] || NODE_IP=$(hostname -I | awk '{print $1}')
sign() { # sign NAME SUBJECT EXT
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$WORK/$1.key" -subj "$2" -out "$WORK/$1.csr" 2>/dev/null
	printf '%s\n' "$3" >"$WORK/$1.ext"
	openssl x509 -req -in "$WORK/$1.csr" -CA "$CLUSTER_CA" -CAkey "${CLUSTER_CA%.crt}.key" \
		-CAcreateserial -days 1 -extfile "$WORK/$1.ext" -out "$WORK/$1.crt" 2>/dev/null
}
sign client "/O=system:nodes/CN=system:node:$NODE" \
	"keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
sign serving "/O=system:nodes/CN=system:node:$NODE" \
	"keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:$NODE,IP:$NODE_IP"
NODE_KC=$WORK/node.kubeconfig
kc_node() { "$KUBECTL" --kubeconfig "$NODE_KC" "$@"; }
kc_node config set-cluster lab --server="$APISERVER_URL" --certificate-authority="$CLUSTER_CA" \
	--embed-certs >/dev/null
kc_node config set-credentials node --client-certificate="$WORK/client.crt" \
	--client-key="$WORK/client.key" --embed-certs >/dev/null
kc_node config set-context lab --cluster=lab --user=node >/dev/null
kc_node config use-context lab >/dev/null

# ---- picolet joins.
"$BIN" run \
	--kubeconfig "$NODE_KC" \
	--pod-manifest-path "$WORK/manifests" \
	--container-runtime-endpoint "$endpoint" \
	--root-dir "$WORK/root" \
	--device-plugin-dir "" \
	--pod-log-dir "$WORK/pod-logs" \
	--cgroup-root "/picolet-e2e-$BRIDGE" \
	--pod-infra-container-image localhost/pause:edge \
	--hostname-override "$NODE" \
	--node-ip "$NODE_IP" --address "$NODE_IP" --port "$NODE_PORT" \
	--tls-cert-file "$WORK/serving.crt" --tls-private-key-file "$WORK/serving.key" \
	--client-ca-file "$CLUSTER_CA" \
	--authentication-token-webhook --authorization-mode Webhook \
	--eviction-hard 'memory.available<1Mi,nodefs.available<1%,imagefs.available<1%' \
	--image-gc-high-threshold 100 --image-gc-low-threshold 99 \
	>"$WORK/picolet.log" 2>&1 &
picolet_pid=$!

wait_for() { # wait_for SECONDS CMD...
	local n=$(($1 * 2))
	shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
	return 1
}
node_ready() { [[ $(kc get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
if ! wait_for 60 node_ready; then
	bad "node $NODE Ready within 60 s"
	tail -n 30 "$WORK/picolet.log"
	exit 1
fi
ok "node $NODE joined with its CA-signed client certificate and is Ready"
port=$(kc get node "$NODE" -o jsonpath='{.status.daemonEndpoints.kubeletEndpoint.Port}')
check "status.daemonEndpoints.kubeletEndpoint.Port = $NODE_PORT (got $port)" test "$port" = "$NODE_PORT"
addr=$(kc get node "$NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
check "InternalIP = $NODE_IP (got $addr)" test "$addr" = "$NODE_IP"

# ---- a pod bound to the node (no scheduler): counts on stdout, serves a page on 8080.
kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: node-api, namespace: default}
spec:
  nodeName: $NODE
  containers:
  - name: main
    image: localhost/busybox:edge
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www; echo hello-through-port-forward > /www/index.html; httpd -p 8080 -h /www; i=0; while true; do echo line-\$i; i=\$((i+1)); sleep 1; done']
EOF
pod_running() { [[ $(kc get pod node-api -o jsonpath='{.status.phase}') == Running ]]; }
if ! wait_for 90 pod_running; then
	bad "pod node-api Running within 90 s"
	kc describe pod node-api | tail -n 20
	tail -n 30 "$WORK/picolet.log"
	exit 1
fi
ok "pod node-api Running on $NODE"
sleep 3

# ---- through the apiserver (admin kubeconfig → apiserver → picolet with its kubelet-client cert)
kc logs node-api >"$WORK/logs.txt" 2>&1 || true
check "kubectl logs: $(head -c 60 "$WORK/logs.txt" | tr '\n' ' ')" grep -q '^line-0$' "$WORK/logs.txt"
timeout 6 "$KUBECTL" --kubeconfig "$KUBECONFIG" logs -f node-api >"$WORK/follow.txt" 2>&1 || true
before=$(wc -l <"$WORK/logs.txt")
after=$(wc -l <"$WORK/follow.txt")
last=$(tail -n 1 "$WORK/follow.txt")
check "kubectl logs -f: $after lines, ending $last (plain logs had $before)" \
	test "$after" -ge $((before + 3))
# shellcheck disable=SC2016 # $x is the container's
out=$(printf 'hello-stdin\n' | kc exec -i node-api -- sh -c 'read x; echo "got:$x"' 2>&1 || true)
check "kubectl exec -i (stdin): $out" test "$out" = "got:hello-stdin"
pf_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
kc port-forward pod/node-api "$pf_port:8080" >"$WORK/pf.txt" 2>&1 &
pf_pid=$!
wait_for 20 grep -q Forwarding "$WORK/pf.txt" || true
page=$(curl -sS --max-time 5 "http://127.0.0.1:$pf_port/" 2>&1 || true)
check "kubectl port-forward + curl: $page" test "$page" = "hello-through-port-forward"
kill "$pf_pid" 2>/dev/null || true
pf_pid=''
kc get --raw "/api/v1/nodes/$NODE/proxy/stats/summary" >"$WORK/summary.json" 2>&1 || true
check "get --raw /api/v1/nodes/$NODE/proxy/stats/summary names the node and the pod" \
	sh -c "grep -q '\"nodeName\": *\"$NODE\"' '$WORK/summary.json' && grep -q node-api '$WORK/summary.json'"
top=$(kc top node "$NODE" 2>&1 || true)
echo "node-api: kubectl top node (no metrics-server, expected to fail): $top"

# ---- directly at the node API
url=https://$NODE_IP:$NODE_PORT
code() { curl -s -o /dev/null -w '%{http_code}' --cacert "$CLUSTER_CA" --max-time 5 "$@"; }
check "no credentials → 401" test "$(code "$url/pods")" = 401
check "a bad token → 401" test "$(code -H 'Authorization: Bearer not-a-token' "$url/pods")" = 401
kc create sa node-api-nobody >/dev/null
kc create sa node-api-reader >/dev/null
kc create clusterrolebinding node-api-reader --clusterrole=system:kubelet-api-admin \
	--serviceaccount=default:node-api-reader >/dev/null
nobody=$(kc create token node-api-nobody)
reader=$(kc create token node-api-reader)
c=$(code -H "Authorization: Bearer $nobody" "$url/pods")
check "a service account's token without RBAC → 403 (got $c)" test "$c" = 403
c=$(code -H "Authorization: Bearer $reader" "$url/stats/summary")
check "a service account bound to system:kubelet-api-admin → 200 on /stats/summary (got $c)" test "$c" = 200
c=$(code -H "Authorization: Bearer $reader" "$url/containerLogs/default/node-api/main")
check "… and on /containerLogs (subresource proxy) (got $c)" test "$c" = 200
c=$(code --cert "$WORK/client.crt" --key "$WORK/client.key" "$url/pods")
check "the node's own certificate (system:node:$NODE, not granted nodes/proxy) → 403 (got $c)" test "$c" = 403
msg=$("$KUBECTL" --kubeconfig /dev/null --server "$APISERVER_URL" --certificate-authority "$CLUSTER_CA" \
	--token "$nobody" logs node-api 2>&1 || true)
check "through the apiserver, the token without RBAC is refused: $msg" grep -q Forbidden <<<"$msg"
can=$(kc auth can-i create subjectaccessreviews.authorization.k8s.io --as "system:node:$NODE" --as-group system:nodes 2>/dev/null || true)
check "the Node authorizer lets the node create SubjectAccessReviews (no RBAC binding): $can" test "$can" = yes
leaks=0
for t in "$nobody" "$reader"; do grep -qF "$t" "$WORK/picolet.log" && leaks=1; done
check "no token in picolet's log" test "$leaks" = 0
check "picolet still runs" kill -0 "$picolet_pid"

echo "node-api: $pass passed, $fail failed"
((fail == 0))
