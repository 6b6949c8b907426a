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
# shellcheck disable=SC2317 # called by the EXIT trap
teardown() {
	if [[ -n "$picolet_pid" ]] && kill -0 "$picolet_pid" 2>/dev/null; then
		kill -TERM "$picolet_pid" 2>/dev/null || true
		wait "$picolet_pid" 2>/dev/null || true
	fi
	echo
	echo "demo: tearing the lab down (this removes the pods picolet left running)"
	"$SCRIPT_DIR/lab.sh" down "$LAB" || echo "demo: lab.sh down FAILED" >&2
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

endpoint=$("$SCRIPT_DIR/lab.sh" up "$LAB" | tail -n 1)
mkdir -p "$LAB/manifests"
cp examples/*.yaml "$LAB/manifests/"

cat <<TXT

demo: picolet runs the pods in $LAB/manifests against $endpoint
demo:   container logs:   $LAB/pod-logs/<namespace>_<pod>_<uid>/<container>/<n>.log
demo:   containers:       ctr -a ${endpoint#unix://} -n k8s.io containers ls
demo:   try:              rm $LAB/manifests/hello.yaml   (the pod stops gracefully)
demo: Ctrl-C to stop.

TXT

"$BIN" check --container-runtime-endpoint "$endpoint" --pod-manifest-path "$LAB/manifests" \
	--root-dir "$LAB/picolet" --pod-log-dir "$LAB/pod-logs" || true
echo

"$BIN" run \
	--pod-manifest-path "$LAB/manifests" \
	--container-runtime-endpoint "$endpoint" \
	--root-dir "$LAB/picolet" \
	--pod-log-dir "$LAB/pod-logs" \
	--hostname-override demo &
picolet_pid=$!

if [[ -n "${DEMO_SECONDS:-}" ]]; then
	sleep "$DEMO_SECONDS"
	echo "demo: $DEMO_SECONDS s are up; pods now:"
	ctr -a "${endpoint#unix://}" -n k8s.io containers ls 2>/dev/null || true
	exit 0
fi
wait "$picolet_pid"
