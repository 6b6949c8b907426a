#!/usr/bin/env bash
# picolet joins the lab cluster with only a bootstrap token (TLS bootstrapping and
# rotation), as root:
#
#   tests/cluster/bootstrap.sh [CLUSTER_DIR [LAB_DIR]]
#
# Brings up the control plane (tests/cluster/cluster.sh, --cluster-signing-duration 10m, the
# shortest a signer honours for spec.expirationSeconds) and a lab containerd (tests/e2e/lab.sh),
# starts picolet with --bootstrap-kubeconfig only, and checks, on lasting evidence (objects,
# files, serials; never timings):
#   1. the Node goes Ready; one client CSR (the bootstrap token's), auto-approved and issued;
#   2. kubelet-client-current.pem → kubelet-client-<stamp>.pem, 0600; --kubeconfig 0600 and
#      pointing at it;
#   3. the serving CSR (kubelet-serving, system:node:<name>), approved as an operator would
#      (`kubectl certificate approve`): the node API then serves a certificate the cluster CA
#      issued (openssl s_client), which `picolet get` verifies;
#   4. a restart reuses both certificates: no new CSR, the Node Ready;
#   5. rotation: a second client CSR by the node itself (system:node:<name>), a new serial in
#      kubelet-client-current.pem, and the node's Lease renewed after it and after the first
#      certificate's NotAfter (so on the new certificate); the Node Ready.
# Everything is torn down at the end (also on failure): picolet, the lab, the cluster (unless
# the cluster was already running: then only what this script made in it goes).
#
# Environment: PICOLET_BIN (default: target/debug/picolet under CARGO_TARGET_DIR or the repo),
# PICOLET_LAB_BRIDGE / PICOLET_LAB_SUBNET (lab.sh), BOOT_NODE (default boot-node),
# BOOT_PORT (default 10361), KEEP=1 keeps the directories (not the processes).
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
DIR=$(realpath -m "${1:-/tmp/boot-cluster}")
LAB=$(realpath -m "${2:-/tmp/boot-lab}")
NODE=${BOOT_NODE:-boot-node}
PORT=${BOOT_PORT:-10361}
BIN=${PICOLET_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/debug/picolet}
W=$LAB/boot # picolet's own files: root dir, cert dir, kubeconfig, log
pass=0
fail=0
say() { printf 'bootstrap: %s\n' "$*" >&2; }
ok() { pass=$((pass + 1)); printf 'PASS %s\n' "$*"; }
bad() { fail=$((fail + 1)); printf 'FAIL %s\n' "$*"; }
check() { # check NAME CMD...: PASS if CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}
# until SECONDS CMD...: CMD succeeds within SECONDS (polled every 2 s)
until_ok() {
	local end=$((SECONDS + $1))
	shift
	while ! "$@" 2>/dev/null; do
		((SECONDS < end)) || return 1
		sleep 2
	done
}

[[ -x $BIN ]] || { say "no picolet at $BIN (cargo build, or set PICOLET_BIN)"; exit 2; }
own_cluster=0
if ! "$SCRIPT_DIR/cluster.sh" status "$DIR" >/dev/null 2>&1; then
	PICOLET_CLUSTER_SIGNING_DURATION=10m "$SCRIPT_DIR/cluster.sh" up "$DIR" >&2
	own_cluster=1
fi
eval "$("$SCRIPT_DIR/cluster.sh" env "$DIR")"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
grep -q 'cluster-signing-duration=10m' /proc/"$(cat "$DIR/pids/kube-controller-manager.pid")"/cmdline ||
	say "warning: the controller-manager signs for its default duration: no rotation will be seen"
endpoint=$("$REPO/tests/e2e/lab.sh" up "$LAB" | tail -n 1)
rm -rf "$W"
mkdir -p "$W/manifests"

picolet_pid=
start_picolet() {
	"$BIN" run \
		--kubeconfig "$W/kubelet.conf" \
		--bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" \
		--cert-dir "$W/pki" \
		--rotate-certificates \
		--rotate-server-certificates \
		--container-runtime-endpoint "$endpoint" \
		--root-dir "$W/root" \
		--device-plugin-dir "" \
		--pod-manifest-path "$W/manifests" \
		--pod-log-dir "$W/pod-logs" \
		--cgroup-root "/picolet-e2e-$NODE" \
		--port "$PORT" \
		--hostname-override "$NODE" >>"$W/picolet.log" 2>&1 &
	picolet_pid=$!
}
stop_picolet() {
	[[ -n $picolet_pid ]] || return 0
	kill -TERM "$picolet_pid" 2>/dev/null || true
	for _ in $(seq 30); do kill -0 "$picolet_pid" 2>/dev/null || break; sleep 1; done
	kill -KILL "$picolet_pid" 2>/dev/null || true
	wait "$picolet_pid" 2>/dev/null || true
	picolet_pid=
}
# shellcheck disable=SC2317 # called by the EXIT trap
teardown() {
	stop_picolet
	kc delete node "$NODE" --ignore-not-found >/dev/null 2>&1 || true
	"$REPO/tests/e2e/lab.sh" down "$LAB" >&2 || true
	if ((own_cluster)); then "$SCRIPT_DIR/cluster.sh" down "$DIR" >&2 || true; fi
	printf '%s passed, %s failed\n' "$pass" "$fail"
}
trap teardown EXIT

ready() { [[ $(kc get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
# CSRs made before this run (a cluster that was already up) are not this run's.
old_csrs=" $(kc get csr -o 'jsonpath={.items[*].metadata.name}') "
# csrs SIGNER USER-PREFIX: names of this run's CSRs of SIGNER whose requester starts with
# USER-PREFIX
csrs() {
	kc get csr -o json | python3 -c '
import json, sys
signer, user, old = sys.argv[1], sys.argv[2], sys.argv[3].split()
for c in json.load(sys.stdin)["items"]:
    if c["spec"]["signerName"] == signer and c["spec"]["username"].startswith(user) \
            and c["metadata"]["name"] not in old:
        print(c["metadata"]["name"])' "$1" "$2" "$old_csrs"
}
issued() { # issued NAME: Approved and a certificate
	[[ $(kc get csr "$1" -o 'jsonpath={.status.conditions[?(@.type=="Approved")].status}') == True &&
		-n $(kc get csr "$1" -o 'jsonpath={.status.certificate}') ]]
}
serial() { openssl x509 -noout -serial -in "$W/pki/kubelet-client-current.pem" | cut -d= -f2; }
mode() { stat -L -c %a "$1"; }
CLIENT=kubernetes.io/kube-apiserver-client-kubelet
SERVING=kubernetes.io/kubelet-serving

# ---- 1. bootstrap
start_picolet
say "picolet $picolet_pid joins as $NODE with $BOOTSTRAP_KUBECONFIG only (log: $W/picolet.log)"
check "the Node $NODE is Ready" until_ok 180 ready
mapfile -t boot_csrs < <(csrs "$CLIENT" system:bootstrap:)
check "one client CSR from the bootstrap token (${boot_csrs[*]})" test "${#boot_csrs[@]}" = 1
check "it is approved and issued" issued "${boot_csrs[0]:-none}"
kc get csr "${boot_csrs[0]:-none}" -o 'jsonpath={.spec.username} {.spec.signerName} {.spec.usages} {.status.conditions[0].reason}{"\n"}' || true

# ---- 2. files
cur=$W/pki/kubelet-client-current.pem
target=$(readlink "$cur" || true)
check "kubelet-client-current.pem -> $target" grep -Eq '^kubelet-client-[0-9]{4}(-[0-9]{2}){5}\.pem$' <<<"$target"
check "the key and certificate file is 0600" test "$(mode "$cur")" = 600
check "the key is in it" grep -q 'PRIVATE KEY-----' "$cur"
check "--kubeconfig is 0600" test "$(mode "$W/kubelet.conf")" = 600
check "--kubeconfig uses it" grep -q "client-certificate: \"$cur\"" "$W/kubelet.conf"
openssl x509 -noout -subject -issuer -dates -in "$cur"
check "the client certificate is the node's, from the cluster CA" \
	bash -c "openssl x509 -noout -subject -issuer -in '$cur' | tr -d ' ' | grep -q 'subject=O=system:nodes,CN=system:node:$NODE' &&
		openssl x509 -noout -issuer -in '$cur' | grep -q picolet-lab-ca"
first_serial=$(serial)
first_end=$(date -u -d "$(openssl x509 -noout -enddate -in "$cur" | cut -d= -f2)" +%FT%TZ)

# ---- 3. the serving certificate, approved by an operator
check "a serving CSR from system:node:$NODE" until_ok 60 test -n "$(csrs "$SERVING" "system:node:$NODE")"
mapfile -t serving < <(csrs "$SERVING" "system:node:$NODE")
kc get csr "${serving[@]}" -o wide || true
for c in "${serving[@]}"; do kc certificate approve "$c"; done
check "the serving certificate is written" until_ok 60 test -s "$W/pki/kubelet-server-current.pem"
served() {
	openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null | openssl x509 -noout -subject -issuer
}
served || true
check "the node API serves it (issuer: the cluster CA)" until_ok 30 bash -c "$(declare -f served); PORT=$PORT served | grep -q 'issuer=.*picolet-lab-ca'"
served_serial() { openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null | openssl x509 -noout -serial; }
check "with the serial of kubelet-server-current.pem" test "$(served_serial)" = "$(openssl x509 -noout -serial -in "$W/pki/kubelet-server-current.pem")"
check "picolet get pods verifies it through ROOT-DIR/kubeconfig (tls-server-name $NODE)" \
	"$BIN" --root-dir "$W/root" get pods -A

# ---- 4. a restart reuses both
n_csrs=$(kc get csr -o name | wc -l)
stop_picolet
start_picolet
check "after a restart the Node is Ready" until_ok 120 ready
check "the restart logged the reuse" until_ok 30 grep -q 'has a valid client certificate: no bootstrap' "$W/picolet.log"
check "the restart served the stored serving certificate" until_ok 30 bash -c "$(declare -f served); PORT=$PORT served | grep -q 'issuer=.*picolet-lab-ca'"
check "no new CSR after the restart" test "$(kc get csr -o name | wc -l)" = "$n_csrs"
check "the same client certificate" test "$(serial)" = "$first_serial"

# ---- 5. rotation (10 min certificates, backdated 5 min: the deadline comes 5.5-8.5 min after
# the issue), serving renewals approved as they come
rotated() {
	for c in $(csrs "$SERVING" "system:node:$NODE"); do
		issued "$c" || kc certificate approve "$c" >/dev/null 2>&1 || true
	done
	[[ -n $(csrs "$CLIENT" "system:node:$NODE") && $(serial) != "$first_serial" ]]
}
say "waiting up to 12 min for the client certificate's rotation"
check "the client certificate rotated (a CSR by system:node:$NODE, a new serial)" until_ok 720 rotated
mapfile -t renewals < <(csrs "$CLIENT" "system:node:$NODE")
kc get csr "${renewals[@]}" -o wide || true
check "the renewal was approved and issued" issued "${renewals[0]:-none}"
echo "serial before $first_serial, after $(serial)"
rot_time=$(kc get csr "${renewals[0]:-none}" -o 'jsonpath={.metadata.creationTimestamp}')
lease_after() {
	local renew
	renew=$(kc -n kube-node-lease get lease "$NODE" -o 'jsonpath={.spec.renewTime}')
	python3 -c 'import sys, datetime as d
p = lambda s: d.datetime.fromisoformat(s.replace("Z", "+00:00"))
sys.exit(0 if p(sys.argv[1]) > p(sys.argv[2]) else 1)' "$renew" "$1"
}
check "the Lease is renewed after the rotation ($rot_time)" until_ok 60 lease_after "$rot_time"
# The first certificate expires: a request on it would be refused (401) from then on, so a
# Lease renewed after its NotAfter was sent with the new one.
say "waiting for the first client certificate's NotAfter ($first_end)"
check "the Lease is renewed after the first certificate expired ($first_end)" until_ok 900 lease_after "$first_end"
check "the Node is Ready after the rotation" ready
check "picolet is still running" kill -0 "$picolet_pid"
grep -E 'certificate|CSR|signing request' "$W/picolet.log" | tail -n 12 || true
((fail == 0))
