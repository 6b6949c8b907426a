#!/usr/bin/env bash
# picolet demo, as root on a Debian machine:
#
#   tests/e2e/demo.sh
#
# brings up a throwaway containerd (tests/e2e/lab.sh: private socket, config, CNI bridge and
# local busybox images under <repo>/.lab — the system's containerd is never touched), builds
# picolet, copies examples/*.yaml into .lab/manifests and runs picolet on them in the
# foreground. Drop, edit or delete manifests in .lab/manifests while it runs; container logs
# land in .lab/pod-logs. Ctrl-C stops picolet (the pods keep running, as with the kubelet),
# then the lab is torn down, pods and all.
#
# Environment: DEMO_SECONDS=N stops the demo by itself after N seconds; PROFILE=release
# builds the optimised binary (slower to build).

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
LAB=${PICOLET_LAB_DIR:-$REPO/.lab}
PROFILE=${PROFILE:-debug}

cd "$REPO"
if [[ "$PROFILE" == release ]]; then
	cargo build --release --bin picolet
else
	cargo build --bin picolet
fi
BIN=${CARGO_TARGET_DIR:-$REPO/target}/$PROFILE/picolet

picolet_pid=
torn_down=
# shellcheck disable=SC2317 # called by the traps
teardown() {
	# Whatever ended the demo (Ctrl-C, SIGTERM, a failed start, a pipe closed by `| tee`
	# getting the same Ctrl-C), the lab goes: no signal or failed write stops this.
	trap '' INT TERM PIPE HUP
	set +e
	[[ -z "$torn_down" ]] || return 0
	torn_down=1
	if [[ -n "$picolet_pid" ]] && kill -0 "$picolet_pid" 2>/dev/null; then
		kill -TERM "$picolet_pid" 2>/dev/null
		wait "$picolet_pid" 2>/dev/null
	fi
	say "demo: tearing the lab down (this removes the pods picolet left running)"
	"$SCRIPT_DIR/lab.sh" down "$LAB" >>"$LAB.down.log" 2>&1 ||
		say "demo: lab.sh down FAILED (see $LAB.down.log)"
	say "demo: lab removed (log: $LAB.down.log)"
}
# Messages that must not kill the teardown when stdout is gone.
say() { printf '%s\n' "$*" 2>/dev/null || true; }
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

BRIDGE=${PICOLET_LAB_BRIDGE:-picolet0}
# The node API's port: 10250 (the kubelet's) unless something holds it, then a free one;
# DEMO_PORT=N to choose.
port_free() { ! (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
PORT=${DEMO_PORT:-10250}
if ! port_free "$PORT"; then
	held=$PORT
	PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	say "demo: port $held is taken (a kubelet, another picolet?): the node API listens on $PORT"
fi

endpoint=$("$SCRIPT_DIR/lab.sh" up "$LAB" | tail -n 1)
mkdir -p "$LAB/manifests"
cp examples/*.yaml "$LAB/manifests/"
KUBECONFIG_PATH=$LAB/picolet/kubeconfig

cat <<TXT

demo: picolet runs the pods in $LAB/manifests against $endpoint
demo:   look at them with kubectl (the kubeconfig appears once picolet's node API is up):
demo:       export KUBECONFIG=$KUBECONFIG_PATH
demo:       kubectl get pods -o wide
demo:   or with picolet itself:
demo:       $BIN --root-dir $LAB/picolet get pods
demo:   container logs:   $LAB/pod-logs/<namespace>_<pod>_<uid>/<container>/<n>.log
demo:   try:              rm $LAB/manifests/hello.yaml   (the pod stops gracefully)
demo: Ctrl-C to stop; the lab is torn down, pods and all.

TXT

"$BIN" check --container-runtime-endpoint "$endpoint" --pod-manifest-path "$LAB/manifests" \
	--root-dir "$LAB/picolet" --pod-log-dir "$LAB/pod-logs" || true
echo

# Its own cgroup root (lab.sh removes what is left under it, and only that).
"$BIN" run \
	--pod-manifest-path "$LAB/manifests" \
	--container-runtime-endpoint "$endpoint" \
	--root-dir "$LAB/picolet" \
	--pod-log-dir "$LAB/pod-logs" \
	--cgroup-root "/picolet-demo-$BRIDGE" \
	--port "$PORT" \
	--hostname-override demo &
picolet_pid=$!

if [[ -n "${DEMO_SECONDS:-}" ]]; then
	sleep "$DEMO_SECONDS"
	echo "demo: $DEMO_SECONDS s are up; pods now:"
	"$BIN" --root-dir "$LAB/picolet" get pods -o wide || true
	exit 0
fi
wait "$picolet_pid"
