#!/usr/bin/env bash
# picolet's end-to-end run, as root:
#
#   tests/e2e/run.sh [--runtime NAME] [TEST NAME FILTER...]
#
# builds the e2e test, starts the lab (lab.sh up), checks it (smoke.sh), runs
# `cargo test --features fake-cri --test e2e` (the CSI scenario serves the fake CSI plugin)
# against it one scenario at a time, and always tears the lab down
# (lab.sh down, also on failure or Ctrl-C). Exits with the test's exit code.
#
# --runtime NAME: the lab's CRI runtime, lab.sh's PICOLET_LAB_RUNTIME: containerd (the
# default, Debian's 1.6), containerd2 (2.x built by tests/upstream/build.sh) or crio. The tests
# learn it from PICOLET_E2E_RUNTIME (for the rare runtime-specific expectation).
#
# Environment: PICOLET_LAB_DIR (default <repo>/.lab), PICOLET_LAB_KEEP=1 to leave the lab
# running afterwards (then: tests/e2e/lab.sh down), plus lab.sh's PICOLET_LAB_RUNTIME,
# PICOLET_LAB_BRIDGE and PICOLET_LAB_SUBNET.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
LAB=${PICOLET_LAB_DIR:-$REPO/.lab}

case "${1:-}" in
--runtime)
	[[ $# -ge 2 ]] || { echo "run.sh: --runtime needs a name" >&2; exit 2; }
	export PICOLET_LAB_RUNTIME=$2
	shift 2
	;;
--runtime=*)
	export PICOLET_LAB_RUNTIME=${1#--runtime=}
	shift
	;;
esac

cd "$REPO"
# Compile first: a build error needs no lab.
cargo test --features fake-cri --test e2e --no-run
cargo test --features mock-apiserver --test e2e_api --no-run

# A neighbour's empty cgroup (another lab, a real node's pod): `down` must leave it.
neighbour=
for d in /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [[ -d $d && -w $d ]]; then
		neighbour=$d/picolet-neighbour-$$/kubepods/pod-x
		break
	fi
done

# shellcheck disable=SC2317 # called by the EXIT trap
teardown() {
	if [[ "${PICOLET_LAB_KEEP:-}" == 1 ]]; then
		echo "run.sh: lab left running (PICOLET_LAB_KEEP=1): $SCRIPT_DIR/lab.sh down $LAB" >&2
		return
	fi
	[[ -z $neighbour ]] || mkdir -p "$neighbour" 2>/dev/null || neighbour=
	"$SCRIPT_DIR/lab.sh" down "$LAB" || echo "run.sh: lab.sh down FAILED: the machine may need cleaning" >&2
	if [[ -n $neighbour ]]; then
		local ok=1
		[[ -d $neighbour ]] || ok=0
		rmdir "$neighbour" "${neighbour%/*}" "${neighbour%/*/*}" 2>/dev/null
		if ((ok)); then
			echo "run.sh: lab.sh down left a neighbour's empty cgroup alone" >&2
		else
			echo "run.sh: FAILED: lab.sh down removed a neighbour's cgroup ($neighbour)" >&2
			exit 1
		fi
	fi
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

endpoint=$("$SCRIPT_DIR/lab.sh" up "$LAB" | tail -n 1)
# The lab's runtime as lab.sh remembers it (a kept lab may differ from the environment).
PICOLET_E2E_RUNTIME=$("$SCRIPT_DIR/lab.sh" runtime-name "$LAB")
export PICOLET_E2E_RUNTIME
# CDI specs the runtime reads (containerd 2.x and CRI-O; Debian's containerd 1.6 has no CDI).
if [[ $PICOLET_E2E_RUNTIME != containerd ]]; then
	export PICOLET_E2E_CDI_DIR=$LAB/cdi
fi
echo "run.sh: runtime $PICOLET_E2E_RUNTIME at $endpoint" >&2
"$SCRIPT_DIR/smoke.sh" "$LAB"

rc=0
PICOLET_E2E_ENDPOINT="$endpoint" RUST_BACKTRACE="${RUST_BACKTRACE:-0}" \
	cargo test --features fake-cri --test e2e -- --test-threads=1 --nocapture "$@" || rc=$?
echo "run.sh: e2e tests exited with $rc" >&2
# apiserver mode (the mock API server runs inside the test process)
if ((rc == 0)); then
	PICOLET_E2E_ENDPOINT="$endpoint" RUST_BACKTRACE="${RUST_BACKTRACE:-0}" \
		cargo test --features mock-apiserver --test e2e_api -- --test-threads=1 --nocapture "$@" || rc=$?
	echo "run.sh: e2e_api tests exited with $rc" >&2
fi
exit "$rc"
