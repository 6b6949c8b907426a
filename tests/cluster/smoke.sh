#!/usr/bin/env bash
# Proves the lab control plane does what picolet's TLS bootstrap will need, end to end:
#
#   tests/cluster/smoke.sh [DIR]
#
# cluster.sh up; admin checks (/readyz, namespaces, the default ServiceAccount, RBAC);
# a bootstrap-token client creates a node-client CSR for system:node:test-node, as a kubelet's
# TLS bootstrap does, and the controller-manager approves and signs it; with that certificate
# the Node authorizer lets the node list nodes and forbids it all secrets; cluster.sh down; no
# process of DIR is left. Ends with "N passed, N failed"; exits non-zero if any check failed.
set -euo pipefail
shopt -s inherit_errexit

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$SCRIPT_DIR/cluster.sh
DIR=$(realpath -m "${1:-${PICOLET_CLUSTER_DIR:-/tmp/picolet-cluster-smoke}}")
NODE=test-node
BOOTSTRAP_GROUP=system:bootstrappers:kubeadm:default-node-token
T0=$(date +%s.%N)
passed=0 failed=0

say() { printf 'smoke: %s\n' "$*" >&2; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }
ok() { passed=$((passed + 1)); printf 'PASS  %s\n' "$*"; }
bad() { failed=$((failed + 1)); printf 'FAIL  %s\n' "$*"; }
# expect WHAT WANT CMD...: CMD's output (stdout and stderr) must match the regex WANT.
expect() {
	local what=$1 want=$2 out
	shift 2
	out=$("$@" 2>&1) || true
	printf '      $ %s\n' "$*" | sed "s|$DIR|\$DIR|g"
	awk 'NR <= 12 { print "        " $0 }' <<<"$out"
	if [[ $out =~ $want ]]; then ok "$what"; else bad "$what (wanted /$want/)"; fi
}

cleanup() {
	local rc=$?
	if [[ $rc != 0 ]]; then
		say "failed (exit $rc): stopping the cluster, keeping $DIR for a look"
		KEEP=1 "$CLUSTER" down "$DIR" || true
	fi
}
trap cleanup EXIT

say "cluster.sh up $DIR"
"$CLUSTER" up "$DIR"
say "up after $(elapsed)"
# shellcheck disable=SC1091
. "$DIR/env"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
kb() { "$KUBECTL" --kubeconfig "$BOOTSTRAP_KUBECONFIG" "$@"; }
TOKEN_ID=$(<"$DIR/bootstrap-token-id")
WORK=$DIR/smoke
mkdir -p "$WORK"

echo "== admin ($KUBECONFIG)"
expect "kubectl version: client and server $KUBERNETES_VERSION" "Server Version: $KUBERNETES_VERSION" k version
expect "/readyz" '^ok$' k get --raw /readyz
expect "namespaces default, kube-system, kube-public, kube-node-lease" \
	'default.*kube-node-lease.*kube-public.*kube-system' k get ns -o 'jsonpath={.items[*].metadata.name}'
expect "ServiceAccount default in default" '^default$' k -n default get sa default -o 'jsonpath={.metadata.name}'
expect "admin may do anything (system:masters)" '(^|[[:space:]])yes$' k auth can-i '*' '*'
expect "bootstrap token may create CSRs" '(^|[[:space:]])yes$' \
	k auth can-i create certificatesigningrequests --as="system:bootstrap:$TOKEN_ID" \
	--as-group=system:bootstrappers --as-group="$BOOTSTRAP_GROUP"
expect "bootstrap token's node-client CSRs are auto-approved" '(^|[[:space:]])yes$' \
	k auth can-i create certificatesigningrequests --subresource=nodeclient --as="system:bootstrap:$TOKEN_ID" \
	--as-group=system:bootstrappers --as-group="$BOOTSTRAP_GROUP"
expect "nodes may renew their own client certificate" '(^|[[:space:]])yes$' \
	k auth can-i create certificatesigningrequests --subresource=selfnodeclient --as="system:node:$NODE" \
	--as-group=system:nodes
expect "bootstrap token may not read secrets" '^no' \
	k auth can-i get secrets -n kube-system --as="system:bootstrap:$TOKEN_ID" \
	--as-group=system:bootstrappers --as-group="$BOOTSTRAP_GROUP"

echo "== bootstrap token ($BOOTSTRAP_KUBECONFIG)"
expect "the token authenticates as system:bootstrap:$TOKEN_ID" "system:bootstrap:$TOKEN_ID.*$BOOTSTRAP_GROUP" kb auth whoami
expect "the token may create CSRs" '(^|[[:space:]])yes$' kb auth can-i create certificatesigningrequests
expect "the token may not list secrets" '^no' kb auth can-i list secrets -A

# A kubelet's TLS bootstrap: an EC P-256 key, a CSR for O=system:nodes, CN=system:node:NAME.
openssl ecparam -name prime256v1 -genkey -noout -out "$WORK/node.key" 2>/dev/null
openssl req -new -key "$WORK/node.key" -subj "/O=system:nodes/CN=system:node:$NODE" -out "$WORK/node.csr" 2>/dev/null
csr=$(kb create -o name -f - <<EOF
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  generateName: node-csr-
spec:
  request: $(base64 -w0 <"$WORK/node.csr")
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, client auth]
EOF
)
csr=${csr#*/}
say "created CSR $csr as the bootstrap token ($(elapsed))"
t=$(date +%s.%N)
crt=""
for ((i = 0; i < 150; i++)); do
	crt=$(kb get csr "$csr" -o 'jsonpath={.status.certificate}' 2>/dev/null) || true
	[[ -n $crt ]] && break
	sleep 0.2
done
took=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
expect "CSR $csr approved by the controller-manager" 'Approved=True AutoApproved' \
	kb get csr "$csr" -o 'jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
if [[ -n $crt ]]; then
	ok "CSR $csr signed: status.certificate filled ${took}s after creation"
	base64 -d <<<"$crt" >"$WORK/node.crt"
	expect "signed certificate: subject, issuer = the cluster CA, client auth" \
		"subject=O ?= ?system:nodes, CN ?= ?system:node:$NODE.*issuer=CN ?= ?picolet-lab-ca.*TLS Web Client Authentication" \
		openssl x509 -in "$WORK/node.crt" -noout -subject -issuer -enddate -ext extendedKeyUsage
	expect "the certificate verifies against DIR/pki/ca.crt" 'node.crt: OK' openssl verify -CAfile "$CLUSTER_CA" "$WORK/node.crt"
else
	bad "CSR $csr: no status.certificate after ${took}s"
fi

echo "== node system:node:$NODE (the signed certificate)"
NODE_KUBECONFIG=$WORK/node.kubeconfig
if [[ -f $WORK/node.crt ]]; then
	kn() { "$KUBECTL" --kubeconfig "$NODE_KUBECONFIG" "$@"; }
	kn config set-cluster lab --server="$APISERVER_URL" --certificate-authority="$CLUSTER_CA" --embed-certs >/dev/null
	kn config set-credentials node --client-certificate="$WORK/node.crt" --client-key="$WORK/node.key" --embed-certs >/dev/null
	kn config set-context node@lab --cluster=lab --user=node >/dev/null
	kn config use-context node@lab >/dev/null
	expect "the certificate authenticates as system:node:$NODE in system:nodes" "system:node:$NODE.*system:nodes" kn auth whoami
	# A node registers its own Node object (NodeRestriction admits that, and no other).
	node_yaml() { printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {kubernetes.io/hostname: %s}\n' "$1" "$1"; }
	expect "the node registers its own Node object" "node/$NODE created" kn create -f - < <(node_yaml "$NODE")
	expect "the node may not register another node (NodeRestriction)" 'Forbidden.*node "'"$NODE"'" is not allowed to modify node "other-node"' \
		kn create -f - < <(node_yaml other-node)
	expect "kubectl get node $NODE: allowed (Node authorizer)" "^NAME .*$NODE +(NotReady|Unknown)" kn get node "$NODE"
	expect "kubectl get nodes --field-selector metadata.name=$NODE: allowed" "$NODE +(NotReady|Unknown)" \
		kn get nodes --field-selector "metadata.name=$NODE"
	# Since the Node authorizer's selector-aware rules, a node may list only its own Node.
	expect "kubectl get nodes (all of them): forbidden, only its own Node" \
		"Forbidden.*cannot list resource \"nodes\".*only its own Node object" kn get nodes
	expect "kubectl get secrets -A: forbidden" 'Forbidden.*system:node:'"$NODE"'.*cannot list resource "secrets"' kn get secrets -A
	expect "the node may not read a secret no pod of it uses" 'Forbidden' kn -n kube-system get secret "bootstrap-token-$TOKEN_ID"
fi

echo "== controllers"
signed=""
for ((i = 0; i < 100; i++)); do
	signed=$(k -n kube-public get configmap cluster-info -o "jsonpath={.data.jws-kubeconfig-$TOKEN_ID}" 2>/dev/null) || true
	[[ -n $signed ]] && break
	sleep 0.2
done
if [[ -n $signed ]]; then ok "bootstrapsigner signed kube-public/cluster-info for token $TOKEN_ID"; else bad "cluster-info not signed for $TOKEN_ID"; fi
expect "cluster.sh status: all four healthy" '(etcd +[0-9]+ +[0-9]+ +ok).*(kube-apiserver +[0-9]+ +[0-9]+ +ok).*(kube-controller-manager +[0-9]+ +[0-9]+ +ok).*(kube-scheduler +[0-9]+ +[0-9]+ +ok)' \
	"$CLUSTER" status "$DIR"
say "checks done after $(elapsed)"

echo "== down"
"$CLUSTER" down "$DIR"
expect "no process of DIR is left (pgrep -af $DIR/)" '^$' pgrep -af -- "$DIR/"
if [[ ! -e $DIR ]]; then ok "DIR removed"; else bad "$DIR still there"; fi
say "total $(elapsed)"
echo "smoke: $passed passed, $failed failed"
[[ $failed == 0 ]]
