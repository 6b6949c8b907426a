#!/usr/bin/env bash
# Kubernetes' node conformance tests against picolet: the upstream e2e suite's
# `[NodeConformance]` specs, with picolet as the only node of the lab's real control plane.
#
#   tests/conformance/run.sh [--conformance] [--focus REGEX] [-- E2E_TEST_FLAGS...]   as root
#
#   (default)       --ginkgo.focus='\[NodeConformance\]' minus the named skips below
#   --conformance   the `[Conformance]` specs of the node areas instead (focus NODE_AREAS)
#   --focus REGEX   a focus of your own (e.g. one spec while triaging); the skips still apply
#
# The stage: the control plane (tests/cluster/cluster.sh, the pinned Kubernetes version), a
# private CRI runtime (tests/e2e/lab.sh; PICOLET_LAB_RUNTIME, default containerd), the test
# images made under their upstream names and loaded into it (tests/conformance/images.sh),
# picolet (the debug build of this checkout, or $PICOLET_BIN) joined by bootstrap token as
# tests/cluster/e2e.sh joins it, node Ready; then e2e.test (tests/upstream/build.sh
# e2e.test) against it, on PICOLET_CONF_NODES parallel Ginkgo processes. Everything is torn down at the end (KEEP=1 keeps
# it running).
#
# Output in $OUT (default $DIR/out, kept after teardown, DIR's other parts removed):
#   junit_01.xml    e2e.test's JUnit report (--report-dir)
#   e2e.log         e2e.test's output; picolet.log picolet's; runtime.log the runtime's
#   results.tsv     test <TAB> passed|failed|skipped <TAB> reason (the focused specs only)
# and a last line "conformance: N passed, N failed, N skipped (T s, Kubernetes vX, <runtime> X)".
#
# Environment: PICOLET_CONF_DIR (default /var/tmp/picolet-conf; the lab directory is DIR/lab,
# short for containerd 2.x's socket paths; not under /tmp, which the HostPath specs mount: CRI-O
# refuses a private hostPath mount that holds its storage root on a host whose / is private), PICOLET_LAB_BRIDGE (piconf), PICOLET_LAB_SUBNET
# (10.88.130.0/24), PICOLET_CONF_PORT (the node API's port, 10370), PICOLET_CONF_NODE
# (conf-node), PICOLET_CONF_CGROUP_ROOT (/picolet-conf), PICOLET_CONF_SLOW=1 (run the [Slow]
# specs too), PICOLET_CONF_TIMEOUT (ginkgo's suite timeout, 6h), PICOLET_CONF_NODES (parallel
# Ginkgo processes, 4; 1 runs e2e.test alone, one spec at a time), PICOLET_CONF_EVICTION_HARD
# (picolet's --eviction-hard; the default's 1 % of a shared machine's full disk can be more
# than is left: DiskPressure then evicts and rejects the specs' pods), PICOLET_BIN, OUT, KEEP=1.
set -euo pipefail
shopt -s inherit_errexit

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
# shellcheck source=tests/upstream/versions.sh
. "$REPO/tests/upstream/versions.sh"
DIR=$(realpath -m "${PICOLET_CONF_DIR:-/var/tmp/picolet-conf}")
OUT=$(realpath -m "${OUT:-$DIR/out}")
export PICOLET_LAB_BRIDGE=${PICOLET_LAB_BRIDGE:-piconf}
export PICOLET_LAB_SUBNET=${PICOLET_LAB_SUBNET:-10.88.130.0/24}
export PICOLET_LAB_RUNTIME=${PICOLET_LAB_RUNTIME:-containerd}
PORT=${PICOLET_CONF_PORT:-10370}
NODES=${PICOLET_CONF_NODES:-4}
NODE=${PICOLET_CONF_NODE:-conf-node}
CGROUP_ROOT=${PICOLET_CONF_CGROUP_ROOT:-/picolet-conf}
CLUSTER=$REPO/tests/cluster/cluster.sh
LAB_SH=$REPO/tests/e2e/lab.sh
IMAGES=$SCRIPT_DIR/images.sh
BUILD=$REPO/tests/upstream/build.sh
T0=$(date +%s)

# The node areas whose [Conformance] specs --conformance runs (test/e2e/common/node and
# common/storage: sig-node and the node's volumes).
NODE_AREAS='\[sig-node\].*\[Conformance\]|\[sig-storage\] (ConfigMap|Secrets|Projected|Downward API|EmptyDir|HostPath).*\[Conformance\]'

# The named skips: REGEX <TAB> why. Only what one node without cluster DNS, kube-proxy, a
# registry or a cloud cannot do; each is matched against the spec's full name.
SKIPS=(
	$'ImageVolume should succeed with pod and pull policy of Always\t(--conformance) its image volume is upstream\'s kitten image with pull policy Always: a pull from registry.k8s.io, which this lab has not (and Debian\'s containerd 1.6 has no image volumes: README "Image volumes"; e2e t and tests/cluster/e2e.sh image-volume cover them on containerd 2.x and CRI-O)'
	$'Container Runtime blackbox test when running a container with a new image\tits BeforeEach starts a fake registry (agnhost fake-registry-server) with hostNetwork on the node\'s port 5000, outside this lab\'s resources on a shared machine, serving content upstream fetches from registry.k8s.io when it builds agnhost (no registry here); one of its four specs also pulls agnhost from registry.k8s.io with pull policy Always'
)
if [[ ${PICOLET_CONF_SLOW:-} != 1 ]]; then
	# kubernetes: hack/make-rules/test-e2e-node.sh skips them by default (SKIP '\[Flaky\]|\[Slow\]|\[Serial\]'); its [Serial] specs we run (one spec at a time anyway).
	SKIPS+=($'\\[Slow\\]\t[Slow]: upstream\'s node e2e skips them by default (hack/make-rules/test-e2e-node.sh) (PICOLET_CONF_SLOW=1 runs them; the back-off specs take ~30 min)')
fi

say() { printf 'conformance: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

MODE=nodeconformance
FOCUS='\[NodeConformance\]'
EXTRA=()
while (($#)); do
	case "$1" in
	--conformance) MODE=conformance; FOCUS=$NODE_AREAS ;;
	--focus) FOCUS=${2:?--focus REGEX}; MODE=custom; shift ;;
	--) shift; EXTRA=("$@"); break ;;
	-h | --help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
	shift
done

[[ $(id -u) == 0 ]] || die "run as root (the lab's runtime and picolet's mounts need it)"
[[ ! -e $DIR/cluster && ! -e $DIR/lab && ! -e $DIR/node ]] ||
	die "$DIR holds a run (going on, or a failed one's): remove it first (tests/e2e/lab.sh down $DIR/lab; tests/cluster/cluster.sh down $DIR/cluster)"

# ---------------------------------------------------------------------------------------------
# Binaries: e2e.test, the control plane, crictl are built (or found) by build.sh.

PICOLET=${PICOLET_BIN:-}
if [[ -z $PICOLET ]]; then
	say "building picolet (debug)"
	(cd "$REPO" && cargo build --bin picolet --quiet)
	PICOLET=${CARGO_TARGET_DIR:-$REPO/target}/debug/picolet
fi
[[ -x $PICOLET ]] || die "no picolet binary at $PICOLET"
E2E_TEST=$("$BUILD" --path e2e.test)

picolet_pid=
teardown() {
	local rc=$?
	if [[ ${KEEP:-} == 1 ]]; then
		say "KEEP=1: left running. Clean up: kill $picolet_pid; $LAB_SH down $DIR/lab; $CLUSTER down $DIR/cluster; rm -rf $DIR/node"
		return
	fi
	if [[ -n $picolet_pid ]]; then kill -TERM "$picolet_pid" 2>/dev/null || true; wait "$picolet_pid" 2>/dev/null || true; fi
	[[ -f $DIR/lab/runtime.log ]] && cp "$DIR/lab/runtime.log" "$OUT/runtime.log" 2>/dev/null
	"$LAB_SH" down "$DIR/lab" >/dev/null 2>&1 || say "lab.sh down failed: clean $DIR/lab by hand"
	# picolet's volume mounts (secret, projected: tmpfs) under its root dir, deepest first.
	awk -v d="$DIR/node/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r mp; do
		umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || say "cannot unmount $mp"
	done
	# The pods' cgroups under our own cgroup root (lab.sh removes only its own roots'): rmdir,
	# deepest first; one that still holds a process stays and is named.
	find /sys/fs/cgroup -mindepth 1 -type d -path "*$CGROUP_ROOT" 2>/dev/null | while read -r root; do
		find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || say "cgroup $root not empty: left in place"
	done
	KEEP=1 "$CLUSTER" down "$DIR/cluster" >/dev/null 2>&1 || say "cluster.sh down failed"
	[[ -f $DIR/cluster/logs/kube-apiserver.log ]] && cp "$DIR/cluster/logs/kube-apiserver.log" "$OUT/" 2>/dev/null
	rm -rf "$DIR/cluster" "$DIR/node" "$DIR/images"
	say "torn down; results kept in $OUT"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$DIR/node/manifests" "$OUT"
say "control plane: $CLUSTER up $DIR/cluster"
"$CLUSTER" up "$DIR/cluster" >"$OUT/cluster-up.log" 2>&1 || { cat "$OUT/cluster-up.log" >&2; die "cluster.sh up failed"; }
# shellcheck disable=SC1091
. "$DIR/cluster/env"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
say "lab: $LAB_SH up $DIR/lab ($PICOLET_LAB_RUNTIME, bridge $PICOLET_LAB_BRIDGE, $PICOLET_LAB_SUBNET)"
ENDPOINT=$("$LAB_SH" up "$DIR/lab" 2>"$OUT/lab-up.log" | tail -n 1) || { cat "$OUT/lab-up.log" >&2; die "lab.sh up failed"; }
say "images: $IMAGES build $DIR/images, load into the lab"
"$IMAGES" build "$DIR/images" >"$OUT/images.tsv" 2>"$OUT/images.log" || { cat "$OUT/images.log" >&2; die "images.sh build failed"; }
"$IMAGES" load "$DIR/images" "$DIR/lab" 2>>"$OUT/images.log" || { cat "$OUT/images.log" >&2; die "images.sh load failed"; }
CRICTL=$("$BUILD" --path crictl)
RUNTIME_VERSION=$("$CRICTL" --runtime-endpoint "$ENDPOINT" version 2>/dev/null |
	awk '/^RuntimeName/ { n = $2 } /^RuntimeVersion/ { v = $2 } END { print n " " v }')

# sign NAME SUBJECT SAN: a serving key and certificate of the cluster CA under $DIR/node/pki
# (the apiserver checks picolet's with --kubelet-certificate-authority).
sign() {
	local d=$DIR/node/pki
	mkdir -p "$d"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/$1.key" 2>/dev/null
	openssl req -new -key "$d/$1.key" -subj "$2" -out "$d/$1.csr" 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" >"$d/$1.ext"
	openssl x509 -req -in "$d/$1.csr" -CA "$CLUSTER_CA" -CAkey "$DIR/cluster/pki/ca.key" \
		-CAcreateserial -days 2 -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
	chmod 600 "$d/$1.key"
}
# The node's address: the default route's source. Not loopback: the apiserver's node proxy
# refuses loopback addresses.
NODE_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[[ -n $NODE_IP ]] || die "no default route: cannot tell the node's address"
sign node-serving "/O=system:nodes/CN=system:node:$NODE" "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE"

# As tests/cluster/e2e.sh starts it: the join by bootstrap token, the node API behind the
# apiserver's client certificate and webhook authn/authz, the disk thresholds low (a shared
# build machine's disk is often under the default 15 % free: DiskPressure would taint the node).
# Image GC off (kubelet: a high threshold of 100): nothing can be pulled again here, and this
# machine's disk reads 86 % used the kubelet's way (100 - available/capacity; blocks reserved
# beyond the free ones), so GC removed the test images between specs; the lab's sandbox image
# named as the kubelet's --pod-infra-container-image, which GC never removes, all the same.
PAUSE_IMAGE=localhost/pause:edge
say "picolet: $PICOLET, node $NODE ($NODE_IP), node API port $PORT, cgroup root $CGROUP_ROOT"
RUST_LOG=${RUST_LOG:-info} "$PICOLET" run \
	--kubeconfig "$DIR/node/kubeconfig" \
	--bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" --cert-dir "$DIR/node/pki" --rotate-certificates \
	--hostname-override "$NODE" \
	--node-ip "$NODE_IP" \
	--pod-manifest-path "$DIR/node/manifests" \
	--container-runtime-endpoint "$ENDPOINT" \
	--root-dir "$DIR/node/root" \
	--device-plugin-dir "" \
	--pod-log-dir "$DIR/node/logs" \
	--cgroup-root "$CGROUP_ROOT" \
	--eviction-hard "${PICOLET_CONF_EVICTION_HARD:-memory.available<100Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%}" \
	--image-gc-high-threshold 100 \
	--pod-infra-container-image "$PAUSE_IMAGE" \
	--address "$NODE_IP" \
	--port "$PORT" \
	--tls-cert-file "$DIR/node/pki/node-serving.crt" \
	--tls-private-key-file "$DIR/node/pki/node-serving.key" \
	--client-ca-file "$CLUSTER_CA" \
	--anonymous-auth=false --authentication-token-webhook --authorization-mode Webhook \
	</dev/null >>"$OUT/picolet.log" 2>&1 &
picolet_pid=$!

jp() { k get "$@" 2>/dev/null; }
node_ready() { [[ $(jp node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
untainted() { [[ -z $(jp node "$NODE" -o 'jsonpath={.spec.taints}') ]]; }
wait_for() { # WHAT SECS CMD...
	local what=$1 end=$((SECONDS + $2))
	shift 2
	until "$@"; do
		((SECONDS < end)) || die "$what: not within $((end - SECONDS + $2)) s (see $OUT/picolet.log)"
		kill -0 "$picolet_pid" 2>/dev/null || die "picolet exited (see $OUT/picolet.log)"
		sleep 2
	done
}
wait_for "node $NODE Ready" 180 node_ready
wait_for "the not-ready taint lifted" 180 untainted
say "node $NODE Ready after $(($(date +%s) - T0)) s; runtime $RUNTIME_VERSION"

# ---------------------------------------------------------------------------------------------
# e2e.test

skip_regex() {
	local s out=()
	for s in "${SKIPS[@]}"; do out+=("${s%%$'\t'*}"); done
	(
		IFS='|'
		echo "${out[*]}"
	)
}
SKIP=$(skip_regex)
E2E_ARGS=(
	--kubeconfig="$KUBECONFIG"
	--provider=skeleton
	--kubectl-path="$KUBECTL"
	--num-nodes=1
	--node-os-distro=debian
	--allowed-not-ready-nodes=0
	--container-runtime-endpoint="$ENDPOINT"
	--report-dir="$OUT"
	--e2e-output-dir="$OUT"
	--disable-log-dump
)
GINKGO_ARGS=(
	--focus="$FOCUS"
	--skip="$SKIP"
	--timeout="${PICOLET_CONF_TIMEOUT:-6h}"
	--no-color
	--v
)
if ((NODES > 1)); then
	# Parallel: the Ginkgo CLI of the version e2e.test was built with runs NODES e2e.test
	# processes; [Serial] specs run alone at the end. The JUnit report is the merged one.
	GINKGO=$("$BUILD" --path ginkgo)
	CMD=("$GINKGO" --nodes="$NODES" "${GINKGO_ARGS[@]}" "$E2E_TEST" -- "${E2E_ARGS[@]}" "${EXTRA[@]}")
else
	CMD=("$E2E_TEST" "${E2E_ARGS[@]}" "${GINKGO_ARGS[@]/#--/--ginkgo.}" "${EXTRA[@]}")
fi
printf '%q ' "${CMD[@]}" >"$OUT/e2e.cmdline"
echo >>"$OUT/e2e.cmdline"
say "e2e.test ($MODE, $NODES ginkgo node(s)): $(cat "$OUT/e2e.cmdline")"
T1=$(date +%s)
rc=0
(cd "$OUT" && "${CMD[@]}") >"$OUT/e2e.log" 2>&1 || rc=$?
SECS=$(($(date +%s) - T1))
say "e2e.test exited $rc after $SECS s"
kill -0 "$picolet_pid" 2>/dev/null || say "picolet is no longer running (see $OUT/picolet.log)"

# ---------------------------------------------------------------------------------------------
# The table and the summary line: the specs the focus selects, with our skips' reasons.

printf '%s\n' "${SKIPS[@]}" >"$OUT/skips.tsv"
python3 "$SCRIPT_DIR/junit.py" "$OUT/junit_01.xml" "$FOCUS" "$OUT/skips.tsv" >"$OUT/results.tsv" ||
	die "no usable JUnit report in $OUT (e2e.test exited $rc; see $OUT/e2e.log)"
read -r np nf ns < <(awk -F'\t' '{ n[$2]++ } END { print n["passed"] + 0, n["failed"] + 0, n["skipped"] + 0 }' "$OUT/results.tsv")
awk -F'\t' '$2 == "failed" { print "FAIL  " $1 }' "$OUT/results.tsv"
echo "conformance: $np passed, $nf failed, $ns skipped ($SECS s, Kubernetes $KUBERNETES_VERSION, $RUNTIME_VERSION)" | tee "$OUT/summary"
((nf == 0))
