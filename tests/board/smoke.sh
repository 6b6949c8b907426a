#!/usr/bin/env bash
# The board's smoke test (issue 38): picolet's Debian package on the emulated arm64 board
# (tests/board/board.sh), systemd as PID 1, cgroup v2, Debian's containerd; a static pod
# runs, and runs again (a new container) after a reboot and after a power cut, with no
# network to any server (qemu's user-mode net with restrict=on).
#
#   tests/board/smoke.sh [DIR]          (as root; DIR defaults to $BOARD_DIR, else /tmp/board)
#
# Phases: build (the rootfs is cached; the disk is made anew), the aarch64 package
# (packaging/build-all.sh + packaging/deb/mkdeb.sh, unless PICOLET_DEB names one), up,
# install (copy-in + dpkg -i, images imported), pod, reboot, power cut + up, the watchdog
# (a SIGSTOPped picolet restarted by systemd, its pod untouched), poweroff draining the
# pods in the kubelet's order (preStop and TERM marks on the guest's disk, read at the next
# boot, which brings the pods back with no network), and a boot with the clock in 1970
# (qemu's RTC). Every wait
# polls for a condition with a generous deadline. Ends with "board: N passed, N failed"
# and a table of the phases' times; exits non-zero when a check failed. The board is
# powered off at the end unless BOARD_KEEP=1.
#
# Environment: PICOLET_DEB (a built picolet_<ver>_arm64.deb), CARGO_TARGET_DIR (where the
# aarch64 build goes), BOARD_* (see board.sh), BOARD_POD_TIMEOUT (default 600 s).
# The guest's commands are single-quoted on purpose: they expand in the guest's shell.
# shellcheck disable=SC2016
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
BOARD="$SCRIPT_DIR/board.sh"
DIR=${1:-${BOARD_DIR:-/tmp/board}}
export BOARD_DIR="$DIR"
POD_TIMEOUT=${BOARD_POD_TIMEOUT:-600}

passed=0
failed=0
phases=()

log() { printf '==> smoke: %s\n' "$*" >&2; }
pass() {
	passed=$((passed + 1))
	printf 'PASS %s\n' "$*"
}
fail() {
	failed=$((failed + 1))
	printf 'FAIL %s\n' "$*"
}
# check NAME CMD...: one check, on the host.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
# g CMD: a shell string in the guest.
g() { "$BOARD" run "$1" "$DIR"; }

phase_start=0
phase() {
	phase_start=$(date +%s)
	log "phase: $1"
}
phase_end() { phases+=("$(printf '%-28s %5d s' "$1" $(($(date +%s) - phase_start)))"); }

finish() {
	local rc=$?
	if [ "${BOARD_KEEP:-0}" != 1 ]; then
		"$BOARD" down "$DIR" >/dev/null 2>&1 || true
	fi
	echo
	printf '%s\n' "phase                        time" "${phases[@]}"
	echo "board: $passed passed, $failed failed"
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then exit 1; fi
	exit 0
}
trap finish EXIT

[ "$(id -u)" -eq 0 ] || {
	echo "smoke.sh needs root (board.sh build)" >&2
	exit 2
}

# The pod: busybox looping on sleep; nothing is pulled (the image is imported, IfNotPresent).
MANIFEST='apiVersion: v1
kind: Pod
metadata:
  name: sleeper
  namespace: default
spec:
  containers:
  - name: sleep
    image: localhost/busybox:edge
    command: ["sh", "-c", "while true; do sleep 5; done"]'

# Two pods whose preStop hook and TERM trap write marks to a hostPath on the guest's disk:
# a regular one and a critical one (priority 2000000000), stopped in that order.
drain_manifest() { # NAME [PRIORITY LINE]
	cat <<EOM
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
spec:
$2  terminationGracePeriodSeconds: 5
  volumes: [{name: marks, hostPath: {path: /var/lib/board-marks, type: DirectoryOrCreate}}]
  containers:
  - name: c
    image: localhost/busybox:edge
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "echo $1 prestop >> /marks/log"]}
    command: ["sh", "-c", "trap 'echo $1 term >> /marks/log; exit 0' TERM; while true; do sleep 1 & wait; done"]
EOM
}

# The ids of the running containers named "sleep" (the CRI labels containerd keeps), one a line.
# ctr, not crictl: Debian bookworm has no crictl package for the guest.
RUNNING='for id in $(ctr -n k8s.io containers ls -q "labels.\"io.kubernetes.container.name\"==sleep"); do
	ctr -n k8s.io tasks ls | awk -v id="$id" '"'"'$1 == id && $3 == "RUNNING" { print id }'"'"'
done'

# wait_running NOT_ID: poll until a running "sleep" container other than NOT_ID exists; print it.
wait_running() {
	local not=$1 deadline ids id
	deadline=$(($(date +%s) + POD_TIMEOUT))
	while :; do
		ids=$(g "$RUNNING" 2>/dev/null || true)
		for id in $ids; do
			if [ "$id" != "$not" ]; then
				echo "$id"
				return 0
			fi
		done
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 5
	done
}

# evidence: the guest's last picolet and containerd lines, after a failed wait.
evidence() {
	g 'journalctl -u picolet -n 4 --no-pager; journalctl -u containerd -n 2 --no-pager; ls -la /var/lib/cni/results' || true
}

# The container's process is in a pod cgroup of picolet's (cgroupfs driver) on cgroup v2.
in_pod_cgroup() {
	local id=$1 cg
	cg=$(g "pid=\$(ctr -n k8s.io tasks ls | awk '\$1 == \"$id\" { print \$2 }'); cat /proc/\$pid/cgroup") || return 1
	log "container $id cgroup: $cg"
	[[ "$cg" == "0::/kubepods/"*"/pod"* ]]
}

# ---- build -------------------------------------------------------------------------------
phase build
"$BOARD" build "$DIR"
phase_end "build (rootfs cached)"

phase package
deb=${PICOLET_DEB:-}
if [ -z "$deb" ]; then
	export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
	nice -n 10 "$REPO/packaging/build-all.sh" --targets aarch64-unknown-linux-musl --static-only-targets none >&2
	deb=$("$REPO/packaging/deb/mkdeb.sh" arm64 "$CARGO_TARGET_DIR/dist/picolet-aarch64-unknown-linux-musl")
fi
[ -f "$deb" ] || {
	fail "no package $deb"
	exit 1
}
phase_end "aarch64 package"

# ---- up and install ----------------------------------------------------------------------
phase up
"$BOARD" up "$DIR"
phase_end "up (first boot)"

check "PID 1 is systemd" g '[ "$(cat /proc/1/comm)" = systemd ]'
check "cgroup v2 (unified) at /sys/fs/cgroup" g '[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]'
check "containerd active" g 'systemctl is-active containerd'

phase install
"$BOARD" copy-in "$deb" /root/picolet.deb "$DIR"
check "dpkg -i picolet" g 'dpkg -i /root/picolet.deb'
check "picolet.service enabled by the package" g '[ "$(systemctl is-enabled picolet)" = enabled ]'
check "images imported" "$BOARD" images "$DIR"
check "static pod written" g "cat > /etc/kubernetes/manifests/sleeper.yaml <<'EOF'
$MANIFEST
EOF"
check "picolet started" g 'systemctl start picolet && systemctl is-active picolet'
phase_end "install"

# ---- the pod -----------------------------------------------------------------------------
phase pod
if id1=$(wait_running none); then
	pass "pod runs (container $id1)"
	check "container in a kubepods pod cgroup (v2)" in_pod_cgroup "$id1"
else
	fail "pod runs within ${POD_TIMEOUT}s"
	evidence
	id1=none
fi
phase_end "pod first runs"

# ---- reboot ------------------------------------------------------------------------------
phase reboot
"$BOARD" reboot "$DIR"
phase_end "reboot"
phase "pod after reboot"
check "picolet active after reboot" g 'systemctl is-active picolet'
if id2=$(wait_running "$id1"); then
	pass "pod runs again after reboot (new container $id2)"
else
	fail "pod runs again after reboot within ${POD_TIMEOUT}s"
	evidence
	id2=$id1
fi
phase_end "pod after reboot"

# ---- power cut ---------------------------------------------------------------------------
phase "power cut"
"$BOARD" kill "$DIR"
"$BOARD" up "$DIR"
phase_end "power cut + up"
phase "pod after power cut"
check "picolet active after power cut" g 'systemctl is-active picolet'
if id3=$(wait_running "$id2"); then
	pass "pod runs again after power cut (new container $id3)"
else
	fail "pod runs again after power cut within ${POD_TIMEOUT}s"
	evidence
fi
phase_end "pod after power cut"

# ---- the watchdog ------------------------------------------------------------------------
phase watchdog
check "picolet.service is Type=notify" g '[ "$(systemctl show -p Type --value picolet)" = notify ]'
check "WatchdogSec=30s" g '[ "$(systemctl show -p WatchdogUSec --value picolet)" = 30s ]'
pid0=$(g 'systemctl show -p MainPID --value picolet' || echo 0)
restarts0=$(g 'systemctl show -p NRestarts --value picolet' || echo 0)
check "SIGSTOP to picolet ($pid0)" g "kill -STOP $pid0"
restarted() {
	local deadline pid
	deadline=$(($(date +%s) + 300))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		pid=$(g 'systemctl is-active -q picolet && systemctl show -p MainPID --value picolet' || true)
		if [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$pid" != "$pid0" ]; then
			log "picolet restarted: pid $pid0 -> $pid"
			return 0
		fi
		sleep 5
	done
	return 1
}
check "systemd restarted the stopped picolet (watchdog)" restarted
check "NRestarts went up" g "[ \"\$(systemctl show -p NRestarts --value picolet)\" -gt $restarts0 ]"
check "the journal says Watchdog timeout" g 'journalctl -u picolet --no-pager | grep -q "Watchdog timeout"'
# picolet restarts without touching containers: the same one runs.
sleep 20
check "the pod's container untouched by the restart (${id3:-none})" g "$RUNNING | grep -qx ${id3:-none}"
phase_end "watchdog"

# ---- poweroff drains the pods ------------------------------------------------------------
phase "poweroff drains"
check "drain pods written" g "rm -rf /var/lib/board-marks; cat > /etc/kubernetes/manifests/drain-a.yaml <<'EOF0'
$(drain_manifest regular "")
EOF0
cat > /etc/kubernetes/manifests/drain-b.yaml <<'EOF0'
$(drain_manifest critical "  priority: 2000000000
")
EOF0"
# sleeper and the two drain pods, each a sandbox and a container: 6 running tasks.
all_running() {
	local deadline
	deadline=$(($(date +%s) + POD_TIMEOUT))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		if [ "$(g 'ctr -n k8s.io tasks ls | grep -c RUNNING' || echo 0)" -ge 6 ]; then return 0; fi
		sleep 5
	done
	return 1
}
check "drain pods running" all_running
"$BOARD" poweroff "$DIR"
phase_end "poweroff"
phase "boot after poweroff"
"$BOARD" up "$DIR"
phase_end "up after poweroff"
marks=$(g 'cat /var/lib/board-marks/log' || true)
log "marks: $(echo "$marks" | tr '\n' ',')"
check "preStop then TERM, the regular pod before the critical one, before the power went off" \
	[ "$marks" = "$(printf 'regular prestop\nregular term\ncritical prestop\ncritical term')" ]
check "the last boot's journal shows picolet's node shutdown" \
	g 'journalctl -b -1 -u picolet --no-pager | grep -q "node shutdown: stopping 1 pod(s) of priority 2000000000"'
check "the shutdown hook ran (picolet-node-shutdown.service)" \
	g 'journalctl -b -1 -u picolet-node-shutdown --no-pager | grep -q "node shutdown: done"'
if id4=$(wait_running "$id3"); then
	pass "pod runs again after poweroff, no network (new container $id4)"
else
	fail "pod runs again after poweroff within ${POD_TIMEOUT}s"
	evidence
	id4=$id3
fi
phase_end "pod after poweroff"

# ---- a board without a clock -------------------------------------------------------------
phase "clock in 1970"
"$BOARD" down "$DIR"
BOARD_RTC_BASE=1970-01-01 "$BOARD" up "$DIR"
# systemd moves a 1970 clock forward to its own epoch (the newest of its build date,
# /usr/lib/clock-epoch and the timesync stamp), which is still before picolet's release
# date (clock::FLOOR_SECS, 2026-12-01): what a board without an RTC or network boots with.
now=$(g 'date -u +%s' || echo 0)
year=$(g 'date -u +%Y' || echo 0)
log "the guest's clock at boot: $(g 'date -u +%FT%TZ' || true)"
check "the clock reads before picolet's release date, 2026-12-01 ($(g 'date -u +%F' || true))" [ "$now" -lt 1796083200 ]
if id5=$(wait_running "$id4"); then
	pass "pod runs with the clock in $year (new container $id5)"
else
	fail "pod runs with the clock in $year within ${POD_TIMEOUT}s"
	evidence
fi
check "picolet names the clock" g 'journalctl -b -u picolet --no-pager | grep -q "the clock reads"'
phase_end "pod with the clock unset"
