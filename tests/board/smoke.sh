#!/usr/bin/env bash
# The board's smoke test: picolet's Debian package on the emulated arm64 board
# (tests/board/board.sh), systemd as PID 1, cgroup v2, Debian's containerd, with no network
# to any server (qemu's user-mode net with restrict=on), through the board's life:
#
#   tests/board/smoke.sh [DIR]          (as root; DIR defaults to $BOARD_DIR, else /tmp/board)
#
# Phases: build (the rootfs is cached; the disk is made anew), the aarch64 package
# (packaging/build-all.sh + packaging/deb/mkdeb.sh, unless PICOLET_DEB names one), up,
# install (copy-in + dpkg -i, images imported, three static pods written; nothing starts
# picolet), reboot — picolet starts at boot (Type=notify, READY=1 after the pods were read)
# and runs the pods; the watchdog (a SIGSTOPped picolet restarted by systemd, its pods'
# containers untouched); power cuts at several points (BOARD_CUTS), the pods back after
# each; poweroff draining the pods in the kubelet's order (preStop and TERM marks written to
# the host's directory DIR/share through 9p, read on the host once qemu has exited); the
# next boot (no network) brings them back; boots with the clock in 1970 (qemu's RTC:
# systemd's epoch, then the RTC as it reads). Every wait polls for a condition with a
# generous deadline. Ends with "board: N passed, N failed" and a table of the phases' times;
# exits non-zero when a check failed. The board is powered off at the end unless BOARD_KEEP=1.
#
# Environment: PICOLET_DEB (a built picolet_<ver>_arm64.deb), CARGO_TARGET_DIR (where the
# aarch64 build goes), BOARD_* (see board.sh), BOARD_POD_TIMEOUT (default 600 s),
# BOARD_CUTS (power cuts, default 3: cut 1 with the pods running, 2 as soon as picolet is
# ready at boot, 3 while picolet replaces a pod; further cuts repeat these).
# The guest's commands are single-quoted on purpose: they expand in the guest's shell.
# shellcheck disable=SC2016
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
BOARD="$SCRIPT_DIR/board.sh"
DIR=${1:-${BOARD_DIR:-/tmp/board}}
export BOARD_DIR="$DIR"
POD_TIMEOUT=${BOARD_POD_TIMEOUT:-600}
CUTS=${BOARD_CUTS:-3}
SHARE="$DIR/share"

phases=()

log() { printf '==> smoke: %s\n' "$*" >&2; }
# shellcheck source=tests/board/checks.sh
. "$SCRIPT_DIR/checks.sh"

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

# Three static pods, one container each, all from the imported busybox (IfNotPresent:
# nothing is pulled). "sleeper" loops on sleep. "regular" and "critical" write marks to
# the host's directory (/mnt/share/marks in the guest is DIR/share/marks on the host, 9p):
# their preStop exec hook, then their TERM trap, one line each ("<epoch> <pod> prestop|term").
# "critical" is system-node-critical: a priority of 2000001000 and that class name, as
# kubeadm's static pods carry both (no admission fills spec.priority in a static pod, and
# the kubelet's node shutdown groups pods by spec.priority alone).
sleeper_manifest() { # [ANNOTATION VALUE]
	cat <<EOM
apiVersion: v1
kind: Pod
metadata:
  name: sleeper
  namespace: default
  annotations: {board/rev: "${1:-1}"}
spec:
  containers:
  - name: sleep
    image: localhost/busybox:edge
    command: ["sh", "-c", "while true; do sleep 5; done"]
EOM
}

drain_manifest() { # NAME [PRIORITY LINES]
	cat <<EOM
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
spec:
$2  terminationGracePeriodSeconds: 5
  volumes: [{name: marks, hostPath: {path: /mnt/share/marks, type: DirectoryOrCreate}}]
  containers:
  - name: $1
    image: localhost/busybox:edge
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "echo \$(date +%s) $1 prestop >> /marks/log"]}
    command: ["sh", "-c", "trap 'echo \$(date +%s) $1 term >> /marks/log; exit 0' TERM; while true; do sleep 1 & wait; done"]
EOM
}

CRITICAL_SPEC='  priorityClassName: system-node-critical
  priority: 2000001000
'

# The running containers of the three pods, "NAME ID" a line, sorted (the CRI labels
# containerd keeps; ctr, not crictl: Debian bookworm has no crictl package for the guest).
RUNNING='r=$(ctr -n k8s.io tasks ls | awk '"'"'$3 == "RUNNING" { print $1 }'"'"')
for n in sleep regular critical; do
	for id in $(ctr -n k8s.io containers ls -q "labels.\"io.kubernetes.container.name\"==$n"); do
		if echo "$r" | grep -qx "$id"; then echo "$n $id"; fi
	done
done | sort'

# wait_pods OLD [GIVEUP]: poll until sleep, regular and critical each run in a container
# whose id is not in OLD (the output of an earlier wait_pods, or ""), and the same three
# still run 30 s later (a pod that keeps being replaced is not back); print the "NAME ID"
# lines. Fails at the deadline, or as soon as the guest command GIVEUP succeeds.
wait_pods() {
	local old=$1 giveup=${2:-false} deadline out n id ok
	deadline=$(($(date +%s) + POD_TIMEOUT))
	while :; do
		out=$(g "$RUNNING" 2>/dev/null || true)
		ok=1
		for n in sleep regular critical; do
			id=$(awk -v n="$n" '$1 == n { print $2; exit }' <<<"$out")
			if [ -z "$id" ] || grep -qw -- "$id" <<<"$old"; then ok=0; fi
		done
		if [ "$ok" = 1 ] && steady "$out"; then
			echo "$out"
			return 0
		fi
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		if g "$giveup" 2>/dev/null; then
			log "giving up: $giveup"
			return 1
		fi
		sleep 5
	done
}

# steady STATE: the running containers are STATE at three polls 10 s apart.
steady() {
	local now
	for _ in 1 2 3; do
		sleep 10
		now=$(g "$RUNNING" 2>/dev/null || true)
		[ "$now" = "$1" ] || {
			log "containers were: $(tr '\n' ' ' <<<"$1") now: $(tr '\n' ' ' <<<"$now")"
			return 1
		}
	done
}

# evidence: the guest's last picolet and containerd lines, after a failed wait.
evidence() {
	g 'journalctl -b -u picolet -n 25 --no-pager; journalctl -b -u containerd -n 10 --no-pager
		ls -la /var/lib/cni/results; ctr -n k8s.io tasks ls' || true
}

# pods_back WHAT OLD [GIVEUP]: the three pods run again in new containers, steadily; sets
# STATE.
pods_back() {
	local what=$1 old=$2 new
	if new=$(wait_pods "$old" "${3:-false}"); then
		pass "the three pods run again $what (new containers: $(awk '{ printf "%s %.12s ", $1, $2 }' <<<"$new"))"
		STATE=$new
	else
		fail "the three pods run again $what (waited up to ${POD_TIMEOUT}s)"
		evidence
		STATE=$(g "$RUNNING" 2>/dev/null || true)
	fi
}

# The container's process is in a pod cgroup of picolet's (cgroupfs driver) on cgroup v2.
in_pod_cgroup() {
	local id=$1 cg
	cg=$(g "pid=\$(ctr -n k8s.io tasks ls | awk '\$1 == \"$id\" { print \$2 }'); cat /proc/\$pid/cgroup") || return 1
	log "container $id cgroup: $cg"
	[[ "$cg" == "0::/kubepods/"*"/pod"* ]]
}

# ready_before_active: picolet stamped its "ready" line (all sources read, the runtime
# relisted; it sends READY=1 right after) no later than systemd's ActiveEnterTimestamp of
# the unit: Type=notify, so active means ready. Both are the guest's wall clock.
ready_before_active() {
	local out
	out=$(g 'r=$(journalctl -b -u picolet -o cat --no-pager | grep -m1 -E "^[0-9T:.-]+Z INFO +agent: .*: ready" | cut -d" " -f1)
		a=$(systemctl show -p ActiveEnterTimestamp --value --timestamp=us+utc picolet)
		echo "ready line $r, ActiveEnterTimestamp $a"
		[ -n "$r" ] && [ -n "$a" ] || exit 1
		rs=$(date -u -d "$r" +%s%N); as=$(date -u -d "$a" +%s%N)
		echo "ready $rs ns, active $as ns"
		[ "$rs" -le "$as" ]') || {
		log "$out"
		return 1
	}
	log "$out"
}

# ---- build -------------------------------------------------------------------------------
phase build
"$BOARD" build "$DIR"
phase_end "build (rootfs cached)"

phase package
deb=$(arm64_deb)
[ -f "$deb" ] || {
	fail "no package $deb"
	exit 1
}
phase_end "aarch64 package"

# ---- up and install ----------------------------------------------------------------------
phase up
rm -rf "$SHARE"
"$BOARD" up "$DIR"
phase_end "up (first boot)"

check "PID 1 is systemd" g '[ "$(cat /proc/1/comm)" = systemd ]'
check "cgroup v2 (unified) at /sys/fs/cgroup" g '[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]'
check "containerd active" g 'systemctl is-active containerd'
check "the host's share at /mnt/share (9p)" g '[ "$(stat -fc %T /mnt/share)" = v9fs ] || findmnt -t 9p /mnt/share'

phase install
"$BOARD" copy-in "$deb" /root/picolet.deb "$DIR"
check "dpkg -i picolet" g 'dpkg -i /root/picolet.deb'
check "picolet.service and the shutdown hook enabled by the package" \
	g '[ "$(systemctl is-enabled picolet picolet-node-shutdown | sort -u)" = enabled ]'
check "images imported" "$BOARD" images "$DIR"
check "three static pods written" g "mkdir -p /etc/kubernetes/manifests
cat > /etc/kubernetes/manifests/sleeper.yaml <<'EOF0'
$(sleeper_manifest)
EOF0
cat > /etc/kubernetes/manifests/regular.yaml <<'EOF0'
$(drain_manifest regular "")
EOF0
cat > /etc/kubernetes/manifests/critical.yaml <<'EOF0'
$(drain_manifest critical "$CRITICAL_SPEC")
EOF0
sync"
# The package's postinst starts only the shutdown hook (it prints "then: systemctl start
# picolet"), but the hook's Wants=picolet.service starts picolet too: said, not checked.
log "after dpkg -i: picolet is $(g 'systemctl is-active picolet' || true)"
phase_end "install"

# ---- A: picolet starts at boot -----------------------------------------------------------
phase reboot
"$BOARD" reboot "$DIR"
phase_end "reboot"
phase "pods at boot"
check "picolet active at boot, no start command" g 'systemctl is-active picolet'
check "picolet.service is Type=notify" g '[ "$(systemctl show -p Type --value picolet)" = notify ]'
check "WatchdogSec=30s" g '[ "$(systemctl show -p WatchdogUSec --value picolet)" = 30s ]'
check "READY=1 (the ready line) before systemd called it active" ready_before_active
STATE=""
pods_back "at boot" ""
check "NRestarts 0 after boot" g '[ "$(systemctl show -p NRestarts --value picolet)" = 0 ]'
check "sleeper in a kubepods pod cgroup (v2)" in_pod_cgroup "$(awk '$1 == "sleep" { print $2 }' <<<"$STATE")"
phase_end "pods at boot"

# ---- D: the watchdog ---------------------------------------------------------------------
phase watchdog
before=$STATE
pid0=$(g 'systemctl show -p MainPID --value picolet' || echo 0)
restarts0=$(g 'systemctl show -p NRestarts --value picolet' || echo 0)
check "SIGSTOP to picolet ($pid0)" g "kill -STOP $pid0"
NEWPID=""
restarted() {
	local deadline pid
	deadline=$(($(date +%s) + 300))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		pid=$(g 'systemctl is-active -q picolet && systemctl show -p MainPID --value picolet' || true)
		if [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$pid" != "$pid0" ]; then
			log "picolet restarted: pid $pid0 -> $pid"
			NEWPID=$pid
			return 0
		fi
		sleep 5
	done
	return 1
}
check "systemd restarted the stopped picolet (watchdog, WatchdogSec=30s)" restarted
check "NRestarts went up by one" g "[ \"\$(systemctl show -p NRestarts --value picolet)\" = $((restarts0 + 1)) ]"
check "the journal says Watchdog timeout" g 'journalctl -b -u picolet --no-pager | grep -q "Watchdog timeout"'
g 'journalctl -b -u picolet --no-pager | grep -E "Watchdog timeout|SIGABRT|Main process exited|Scheduled restart" | tail -n 4' || true
# picolet restarts without touching containers: the new one is ready (it relisted the
# runtime and handed every pod to its worker), and for 30 s after that the same containers run.
check "the new picolet ready" g "journalctl -b _PID=${NEWPID:-0} -o cat --no-pager | grep -q ': ready'"
check "the pods' containers untouched by the restart (the same for 30 s after)" steady "$before"
phase_end "watchdog"

# ---- F: power cuts -----------------------------------------------------------------------
# The cut points: 1 the pods running; 2 at boot, as soon as systemd has picolet active
# (READY=1: the pods are being started); 3 while picolet replaces a pod (a changed manifest,
# synced: the old container going, the new one coming). Where a cut falls relative to the
# guest's writeback is not controlled: the check is that the pods come back after each.
for cut in $(seq 1 "$CUTS"); do
	point=$(((cut - 1) % 3 + 1))
	phase "power cut $cut"
	old=$STATE
	case $point in
	1) log "cut $cut: the pods running" ;;
	2)
		"$BOARD" kill "$DIR"
		BOARD_SETTLE=0 "$BOARD" up "$DIR"
		deadline=$(($(date +%s) + POD_TIMEOUT))
		until g 'systemctl is-active -q picolet' 2>/dev/null; do
			[ "$(date +%s)" -lt "$deadline" ] || break
			sleep 1
		done
		log "cut $cut: picolet active at boot, running: $(g "$RUNNING" | tr '\n' ' ' || true)"
		;;
	3)
		g "cat > /etc/kubernetes/manifests/sleeper.yaml.new <<'EOF0'
$(sleeper_manifest "cut$cut")
EOF0
sync; mv /etc/kubernetes/manifests/sleeper.yaml.new /etc/kubernetes/manifests/sleeper.yaml; sync" || true
		deadline=$(($(date +%s) + POD_TIMEOUT))
		sleep_id=$(awk '$1 == "sleep" { print $2 }' <<<"$old")
		while g "$RUNNING" 2>/dev/null | grep -q "^sleep ${sleep_id:-none}\$"; do
			[ "$(date +%s)" -lt "$deadline" ] || break
			sleep 1
		done
		log "cut $cut: the old sleeper gone, running: $(g "$RUNNING" | tr '\n' ' ' || true)"
		;;
	esac
	"$BOARD" kill "$DIR"
	"$BOARD" up "$DIR"
	phase_end "power cut $cut (point $point) + up"
	phase "pods after power cut $cut"
	check "picolet active after power cut $cut" g 'systemctl is-active picolet'
	pods_back "after power cut $cut (point $point)" "$old"
	log "CNI cache: $(g 'find /var/lib/cni -type f -empty ! -name lock | tr "\n" " "; journalctl -b -u picolet -o cat --no-pager | grep -i cni | head -n 3' || true)"
	phase_end "pods after power cut $cut"
done

# ---- B: poweroff drains the pods ---------------------------------------------------------
phase "poweroff drains"
rm -f "$SHARE/marks/log"
"$BOARD" poweroff "$DIR"
off=$(date +%s)
phase_end "poweroff"
marks=$(cat "$SHARE/marks/log" 2>/dev/null || true)
log "marks on the host ($SHARE/marks/log, qemu gone at $off):"
printf '    %s\n' "$marks" >&2
check "preStop then TERM, the regular pod before the critical one (host's copy)" \
	[ "$(awk '{ print $2, $3 }' <<<"$marks")" = "$(printf 'regular prestop\nregular term\ncritical prestop\ncritical term')" ]
in_order_before_off() {
	# The guest's clock came from the host's at boot (the RTC): 5 s of slack.
	awk -v off="$off" 'NR > 1 && $1 < last { bad = 1 } $1 > off + 5 { bad = 1 } { last = $1 } END { exit (bad || NR != 4) }' <<<"$marks" &&
		[ "$(stat -c %Y "$SHARE/marks/log")" -le "$off" ]
}
check "marks stamped in order, before the power went off (host mtime $(stat -c %Y "$SHARE/marks/log" 2>/dev/null || echo none) <= $off)" in_order_before_off

# ---- C: the next boot, no network --------------------------------------------------------
phase "boot after poweroff"
"$BOARD" up "$DIR"
phase_end "up after poweroff"
check "no network: qemu's user net has restrict=on" \
	grep -q 'restrict=on' <(tr '\0' ' ' <"/proc/$(cat "$DIR/qemu.pid")/cmdline")
check "no network: the guest cannot reach the host's slirp gateway (10.0.2.2:22)" \
	g '! timeout 10 bash -c "echo > /dev/tcp/10.0.2.2/22" 2>/dev/null'
shutdown_lines=$(g 'journalctl -b -1 -u picolet -u picolet-node-shutdown -o cat --no-pager | grep "node shutdown"' || true)
log "the last boot's shutdown lines:"
printf '    %s\n' "$shutdown_lines" >&2
shutdown_order() {
	awk '/stopping [0-9]+ pod\(s\) of priority 0\+/ { r = NR } /stopping [0-9]+ pod\(s\) of priority 2000000000\+/ { c = NR } /node shutdown: done/ { d = NR }
		END { exit !(r && c && d && r < c && c < d) }' <<<"$shutdown_lines"
}
check "the last boot's journal: regular pods, then critical, then done" shutdown_order
pods_back "after poweroff, no network" "$STATE"
phase_end "pods after poweroff"

# ---- E: a board without a clock ----------------------------------------------------------
# 1: qemu's RTC at 1970-01-01. systemd moves a clock below its epoch (the newest of its
# build date, /usr/lib/clock-epoch and systemd-timesyncd's stamp, none of which but the
# first exists here) forward to it; still before picolet's release date (clock::FLOOR_SECS,
# 2026-12-01).
FLOOR=1796083200
# The sandboxes of the boots before are dated later than the new ones (the clock went
# back), and the newest by CreatedAt is the pod's sandbox (kubelet: computePodActions):
# picolet can replace the sandbox again and again. Nine "sandbox changed" lines in a boot
# (three per pod; a boot after a cut has one per pod) end the wait early.
CHURN='[ "$(journalctl -b -u picolet -o cat --no-pager | grep -c "sandbox changed")" -ge 9 ]'
churn_evidence() {
	g 'echo "sandbox changed: $(journalctl -b -u picolet -o cat --no-pager | grep -c "sandbox changed") lines"
		for s in $(ctr -n k8s.io containers ls -q "labels.\"io.cri-containerd.kind\"==sandbox"); do
			i=$(ctr -n k8s.io containers info "$s")
			echo "sandbox ${s%"${s#????????????}"} $(echo "$i" | grep -m1 -o "\"CreatedAt\": \"[^\"]*\"") $(echo "$i" | grep -m1 -o "\"io.kubernetes.pod.name\": \"[^\"]*\"")"
		done' || true
}
phase "clock: systemd's epoch"
"$BOARD" down "$DIR"
BOARD_RTC_BASE=1970-01-01 "$BOARD" up "$DIR"
log "the guest's clock: $(g 'date -u +%FT%TZ; cat /sys/class/rtc/rtc0/since_epoch; dmesg | grep -m2 -e "setting system clock" -e "advancing clock"' | tr '\n' ' ' || true)"
now=$(g 'date -u +%s' || echo "$FLOOR")
check "the clock before picolet's release date ($(date -u -d "@$now" +%F))" [ "$now" -lt "$FLOOR" ]
pods_back "with the clock at $(date -u -d "@$now" +%F)" "$STATE" "$CHURN"
check "picolet names the clock" g 'journalctl -b -u picolet -o cat --no-pager | grep "the clock reads"'
churn_evidence
phase_end "clock: systemd's epoch"

# 2: the clock as the RTC reads it, 1970 (a board whose init does not move it, or whose
# systemd has no epoch): a unit of the test's sets it from /sys/class/rtc/rtc0 before
# sysinit.target, that is, before containerd and picolet. The RTC starts at 1970-01-02:
# Linux refuses (EINVAL) a wall clock earlier than the boot's own start, and at
# 1970-01-01T00:00:17 with 20 s of uptime it was (run 5: "date: cannot set date").
phase "clock: 1970"
check "board-rtc-clock.service installed" g 'cat > /etc/systemd/system/board-rtc-clock.service <<'"'"'EOF0'"'"'
[Unit]
Description=board test: the clock as the RTC reads it
DefaultDependencies=no
Before=sysinit.target time-set.target containerd.service picolet.service
ConditionPathExists=/sys/class/rtc/rtc0/since_epoch

[Service]
Type=oneshot
ExecStart=/bin/sh -c "date -u -s @$$(cat /sys/class/rtc/rtc0/since_epoch)"

[Install]
WantedBy=sysinit.target
EOF0
systemctl enable board-rtc-clock.service'
"$BOARD" down "$DIR"
BOARD_RTC_BASE=1970-01-02 "$BOARD" up "$DIR"
log "the guest's clock: $(g 'date -u +%FT%TZ; systemctl is-active board-rtc-clock' | tr '\n' ' ' || true)"
year=$(g 'date -u +%Y' || echo 0)
check "the clock reads 1970 ($year)" [ "$year" = 1970 ]
pods_back "with the clock in $year" "$STATE" "$CHURN"
check "picolet names the clock" g 'journalctl -b -u picolet -o cat --no-pager | grep "the clock reads"'
churn_evidence
g 'journalctl -b -u picolet -o cat --no-pager | grep -E "WARN|ERROR" | grep -v cni_cache | head -n 20' || true
check "NRestarts 0 with the clock in 1970" g '[ "$(systemctl show -p NRestarts --value picolet)" = 0 ]'
g 'systemctl disable -q board-rtc-clock.service; rm -f /etc/systemd/system/board-rtc-clock.service' || true
phase_end "clock: 1970"
