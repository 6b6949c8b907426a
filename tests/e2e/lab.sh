#!/usr/bin/env bash
# picolet's test lab: a private containerd (CRI) instance, fully contained in one directory.
#
#   tests/e2e/lab.sh up     [LAB_DIR]   start it (idempotent); last stdout line = CRI endpoint
#   tests/e2e/lab.sh down   [LAB_DIR]   remove every pod, stop it, leave the machine as it was
#   tests/e2e/lab.sh status [LAB_DIR]   what is running
#   tests/e2e/lab.sh packages          the Debian packages it needs, one per line
#   tests/e2e/lab.sh containerd kill|stop|start [LAB_DIR]
#                                       SIGKILL or stop (SIGTERM) the lab's containerd,
#                                       leaving its pods' shims running; start it again
#
# LAB_DIR defaults to <repo>/.lab (git-ignored). Needs root. Follows
# docs/containerd-e2e.md (shared docs): containerd 1.6 with the CRI plugin, runc with
# cgroupfs, overlayfs, a CNI bridge on a private /24, and two local images built by
# mkimage.py (nothing is ever pulled: there is no registry).
#
# Environment (read by `up`, remembered in $LAB/lab.env for `down`):
#   PICOLET_LAB_BRIDGE   CNI bridge name       (default picolet0)
#   PICOLET_LAB_SUBNET   pod subnet            (default 10.88.77.0/24)
#
# What `up` changes outside $LAB, and `down` puts back:
#   - net.ipv4.ip_forward (the bridge plugin turns it on): saved at the first `up`, restored;
#   - the bridge interface and the pods' veths: deleted;
#   - cgroup directories under the lab's own cgroup roots (`cgroup_roots`: picolet-e2e-,
#     picolet-demo-, picolet-smoke-<bridge>, where its users put their pods): removed when
#     empty — never another lab's or a real node's;
#   - /run/containerd/s: containerd 1.6 shims put their sockets there whatever the config
#     says; stale ones of our shims are removed, the directory too if `up` created it;
#   - missing Debian packages are installed and stay installed.
#
# `down` must work after anything: a failed test, a killed containerd, shims left behind.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables)
# Docker's containerd.io package holds containerd and runc and conflicts with Debian's: where
# it is installed, it stands in for both (its containerd must still speak config version 2).
if [[ "$(dpkg-query -W -f='${db:Status-Status}' containerd.io 2>/dev/null || true)" == installed ]]; then
	PACKAGES=(containerd.io "${PACKAGES[@]:2}")
fi
CNI_BIN_DIR=/usr/lib/cni
NS=k8s.io
PAUSE_IMAGE=localhost/pause:edge
BUSYBOX_IMAGE=localhost/busybox:edge
MARKER=.picolet-lab
# The packaged containerd, its shim, ctr and runc come first: a containerd of another origin in
# /usr/local (a 2.x built for other tests, a tarball install) must not be the lab's, nor lend
# it a shim (containerd finds containerd-shim-runc-v2 on its PATH).
export PATH="/usr/bin:/usr/sbin:/bin:/sbin:$PATH:/usr/local/sbin"

log() { printf 'lab: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
now() { printf '%s' "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }

# Sets LAB, SOCK and the remembered settings. $1: optional lab directory.
init_lab() {
	LAB=$(realpath -m "${1:-$REPO/.lab}")
	case "$LAB" in
	/ | /bin* | /boot* | /dev* | /etc* | /lib* | /proc* | /sbin* | /sys* | /usr* | /var/lib)
		die "refusing lab directory $LAB"
		;;
	esac
	SOCK="$LAB/containerd.sock"
	BRIDGE=${PICOLET_LAB_BRIDGE:-picolet0}
	SUBNET=${PICOLET_LAB_SUBNET:-10.88.77.0/24}
	if [[ -f "$LAB/lab.env" ]]; then
		# shellcheck source=/dev/null
		. "$LAB/lab.env"
	fi
}

ctr_() { timeout 20 ctr -a "$SOCK" -n "$NS" "$@"; }

# The pid of the containerd serving this lab (empty if none). Found through /proc rather
# than a pid file alone, so a stale pid file or a recycled pid can never point elsewhere.
containerd_pid() {
	local pid cmd
	for pid in $(pgrep -x containerd || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *"--config $LAB/config.toml"* ]] || continue
		[[ "$(proc_state "$pid")" != Z ]] || continue
		echo "$pid"
		return 0
	done
}

# Process state letter (R, S, Z...) or empty when gone.
proc_state() { awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null || true; }

# Shim processes of this lab: their command line carries `-address $LAB/containerd.sock`.
shim_pids() {
	local pid cmd
	for pid in $(pgrep -f '^[^ ]*containerd-shim' || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *" $SOCK"* ]] && echo "$pid"
	done
	return 0
}

# Mount points at or under $LAB, in mount order (octal escapes of mountinfo decoded).
lab_mounts() {
	awk -v lab="$LAB" '{
		mp = $5
		gsub(/\\040/, " ", mp); gsub(/\\011/, "\t", mp); gsub(/\\134/, "\\", mp)
		if (mp == lab || index(mp, lab "/") == 1) print mp
	}' /proc/self/mountinfo
}

# The cgroup roots the lab's users put their pods under, by bridge so that two labs never
# share one: e2e's picolet (`--cgroup-root`, tests/common/lab.rs), the demo's, the smoke
# test's sandboxes. The lab owns these and nothing else.
cgroup_roots() { printf '%s\n' "picolet-e2e-$BRIDGE" "picolet-demo-$BRIDGE" "picolet-smoke-$BRIDGE"; }

# Directories under the lab's cgroup roots, in every hierarchy (v1 controllers or v2).
lab_cgroup_dirs() {
	local pattern
	pattern="/($(cgroup_roots | paste -sd'|'))(/|\$)"
	find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | grep -E "$pattern" || true
}

# ---------------------------------------------------------------------------------------
# up

ensure_packages() {
	local missing=() p
	if command -v dpkg-query >/dev/null; then
		for p in "${PACKAGES[@]}"; do
			[[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" == installed ]] ||
				missing+=("$p")
		done
	fi
	if ((${#missing[@]})); then
		command -v apt-get >/dev/null || die "missing packages: ${missing[*]} (and no apt-get)"
		log "installing ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"${missing[@]}" >&2
	fi
	local f
	for f in containerd ctr runc python3 ip; do
		command -v "$f" >/dev/null || die "$f not found in PATH"
	done
	for f in bridge host-local loopback portmap; do
		[[ -x "$CNI_BIN_DIR/$f" ]] || die "CNI plugin $CNI_BIN_DIR/$f missing"
	done
	command -v iptables >/dev/null || die "iptables not found (the portmap plugin needs it)"
	[[ -x /bin/busybox ]] || die "/bin/busybox missing (package busybox-static)"
	# The config below is containerd 1.x's (version = 2); 2.x reads it differently.
	local v
	v=$(containerd --version 2>/dev/null | awk '{ print $3 }')
	[[ "$v" == v1.[67].* || "$v" == 1.[67].* ]] ||
		die "$(command -v containerd) is containerd '$v'; the lab needs 1.6 or 1.7 (Debian's package containerd)"
}

write_config() {
	mkdir -p "$LAB"/{root,state,opt,runc,cni/net.d,cni/ipam,images,saved}
	touch "$LAB/$MARKER"
	printf 'BRIDGE=%q\nSUBNET=%q\n' "$BRIDGE" "$SUBNET" >"$LAB/lab.env"

	local cfg
	cfg=$(
		cat <<EOF
# Written by tests/e2e/lab.sh: a private containerd for picolet's tests.
version = 2
root = "$LAB/root"
state = "$LAB/state"

[grpc]
  address = "$SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$LAB/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Required here: without CAP_SYS_RESOURCE every RunPodSandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$LAB/runc"

    # A second handler name for the runtimeClassName test (the same runc underneath).
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.edge]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.edge.options]
        SystemdCgroup = false
        Root = "$LAB/runc"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$LAB/cni/net.d"
EOF
	)
	if [[ -f "$LAB/config.toml" && "$(cat "$LAB/config.toml")" != "$cfg" && -n "$(containerd_pid)" ]]; then
		die "config changed under a running lab: run '$0 down $LAB' first"
	fi
	write_if_changed "$LAB/config.toml" "$cfg"

	write_if_changed "$LAB/cni/net.d/10-picolet-lab.conflist" "$(
		cat <<EOF
{
  "cniVersion": "0.4.0",
  "name": "picolet-lab",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$LAB/cni/ipam"
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF
	)"
}

# containerd watches the CNI directory and reloads on every write: a file rewritten in place
# is seen half-written ("unexpected end of JSON input"). Write only changes, renamed in whole.
write_if_changed() {
	[[ -f "$1" && "$(cat "$1")" == "$2" ]] && return 0
	printf '%s\n' "$2" >"$LAB/.tmp-write"
	mv -f "$LAB/.tmp-write" "$1"
}

# What must be put back by `down`, recorded once (a second `up` must not overwrite it).
save_host_state() {
	[[ -f "$LAB/saved/ip_forward" ]] || cat /proc/sys/net/ipv4/ip_forward >"$LAB/saved/ip_forward"
	if [[ ! -f "$LAB/saved/run_containerd" ]]; then
		if [[ -d /run/containerd ]]; then echo existed; else echo absent; fi >"$LAB/saved/run_containerd"
	fi
}

start_containerd() {
	local pid log_offset
	log_offset=$(stat -c %s "$LAB/containerd.log" 2>/dev/null || echo 0)
	pid=$(containerd_pid)
	if [[ -n "$pid" ]]; then
		log "containerd already running (pid $pid)"
	else
		rm -f "$SOCK" "$SOCK.ttrpc"
		log "starting containerd (log: $LAB/containerd.log)"
		setsid containerd --config "$LAB/config.toml" </dev/null >>"$LAB/containerd.log" 2>&1 &
	fi

	local i
	for ((i = 0; i < 200; i++)); do
		if [[ -S "$SOCK" ]] && ctr -a "$SOCK" version >/dev/null 2>&1; then
			break
		fi
		if ((i > 10)) && [[ -z "$(containerd_pid)" ]]; then
			tail -n 20 "$LAB/containerd.log" >&2 || true
			die "containerd exited during start"
		fi
		sleep 0.05
	done
	((i < 200)) || die "containerd socket $SOCK not answering after 10 s"
	containerd_pid >"$LAB/containerd.pid"

	# CRI readiness: the plugin loaded without error (picolet's own client checks the CRI
	# Status conditions RuntimeReady/NetworkReady; there is no crictl here).
	local cri=""
	for ((i = 0; i < 100; i++)); do
		cri=$(ctr -a "$SOCK" plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
		[[ "$cri" == ok ]] && break
		sleep 0.05
	done
	if [[ "$cri" != ok ]]; then
		tail -n 20 "$LAB/containerd.log" >&2 || true
		die "CRI plugin status '${cri:-missing}' (expected ok)"
	fi
	local cni_errors
	cni_errors=$(tail -c "+$((log_offset + 1))" "$LAB/containerd.log" | grep -E 'failed to (re)?load cni' || true)
	if [[ -n "$cni_errors" ]]; then
		log "warning: containerd could not load the CNI config:"
		tail -n 1 <<<"$cni_errors" >&2
	fi
}

import_images() {
	local name file have
	have=$(ctr_ images ls -q)
	for name in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
		file="$LAB/images/${name##*/}"
		file="${file%%:*}.tar"
		# Built and imported by an earlier `up` of this lab: nothing to do.
		[[ -f "$file" ]] && grep -qxF "$name" <<<"$have" && continue
		if [[ "$name" == "$PAUSE_IMAGE" ]]; then
			# The sandbox's only process: sleeps as PID 1 of the pod; StopPodSandbox kills it
			# with SIGKILL, so it needs no signal handling.
			python3 "$SCRIPT_DIR/mkimage.py" --name "$name" -o "$file" \
				--entrypoint /bin/busybox --entrypoint sleep --entrypoint infinity 2>/dev/null
		else
			python3 "$SCRIPT_DIR/mkimage.py" --name "$name" -o "$file" --cmd sh 2>/dev/null
		fi
		ctr_ images import --snapshotter overlayfs "$file" >/dev/null
	done
	have=$(ctr_ images ls -q)
	for name in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
		grep -qxF "$name" <<<"$have" || die "image $name missing after import"
	done
}

cmd_up() {
	init_lab "${1:-}"
	[[ $EUID -eq 0 ]] || die "needs root"
	local t0
	t0=$(now)
	ensure_packages
	write_config
	save_host_state
	start_containerd
	import_images
	log "up in $(since "$t0"): containerd $(containerd_pid), bridge $BRIDGE, subnet $SUBNET"
	echo "unix://$SOCK"
}

# ---------------------------------------------------------------------------------------
# down

# Graceful path while containerd answers: kill and delete every task and container, so the
# shims shut down through containerd (and remove their own sockets).
remove_through_containerd() {
	local id ids
	ids=$(ctr_ tasks ls -q 2>/dev/null || true)
	for id in $ids; do
		ctr_ tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $ids; do
		# A task's delete waits for its exit: give the SIGKILL a moment, then force.
		ctr_ tasks delete "$id" >/dev/null 2>&1 || ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr_ containers ls -q 2>/dev/null || true); do
		ctr_ containers delete "$id" >/dev/null 2>&1 || true
	done
	[[ -z "$ids" ]] || log "removed $(wc -w <<<"$ids") task(s) through containerd"
}

# Brute-force path (containerd dead or stuck): runc's own state under $LAB/runc.
remove_through_runc() {
	local root id n=0
	for root in "$LAB"/runc/*/; do
		[[ -d "$root" ]] || continue
		for id in $(runc --root "$root" list -q 2>/dev/null || true); do
			runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
			n=$((n + 1))
		done
	done
	((n == 0)) || log "force-deleted $n container(s) through runc"
}

stop_containerd() {
	local pid i
	pid=$(containerd_pid)
	[[ -n "$pid" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true # a stopped (SIGSTOP) containerd gets the TERM too
	for ((i = 0; i < 100; i++)); do
		[[ -n "$(proc_state "$pid")" && "$(proc_state "$pid")" != Z ]] || break
		sleep 0.1
	done
	if [[ -n "$(proc_state "$pid")" && "$(proc_state "$pid")" != Z ]]; then
		log "containerd did not stop on SIGTERM in 10 s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	log "containerd stopped"
}

kill_shims() {
	local pids i
	pids=$(shim_pids)
	[[ -n "$pids" ]] || return 0
	# shellcheck disable=SC2086 # a list of pids
	kill -KILL $pids 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		[[ -n "$(shim_pids)" ]] || break
		sleep 0.1
	done
	log "killed $(wc -w <<<"$pids") leftover shim(s)"
}

# containerd 1.6 shims listen on /run/containerd/s/<hash> whatever the config says; a shim
# that did not shut down through containerd leaves its socket file. Remove the socket files
# created since `up` that nothing listens on any more.
remove_stale_shim_sockets() {
	[[ -d /run/containerd/s ]] || return 0
	local bound s n=0
	bound=$(awk 'NR > 1 && $8 ~ /^\/run\/containerd\/s\// { print $8 }' /proc/net/unix)
	for s in /run/containerd/s/*; do
		[[ -S "$s" && "$s" -nt "$LAB/saved/run_containerd" ]] || continue
		grep -qxF "$s" <<<"$bound" && continue
		rm -f "$s"
		n=$((n + 1))
	done
	((n == 0)) || log "removed $n stale shim socket(s) from /run/containerd/s"
	if [[ "$(cat "$LAB/saved/run_containerd" 2>/dev/null || true)" == absent ]]; then
		rmdir /run/containerd/s /run/containerd 2>/dev/null || true
	fi
}

unmount_all() {
	local mps mp n=0
	mapfile -t mps < <(lab_mounts | tac)
	for mp in "${mps[@]}"; do
		umount "$mp" 2>/dev/null && n=$((n + 1))
	done
	mapfile -t mps < <(lab_mounts | tac)
	for mp in "${mps[@]}"; do
		log "lazy unmount of busy $mp"
		umount -l "$mp" 2>/dev/null && n=$((n + 1))
	done
	((n == 0)) || log "unmounted $n mount(s)"
	[[ -z "$(lab_mounts)" ]] || die "still mounted under $LAB: $(lab_mounts | tr '\n' ' ')"
}

# portmap's per-sandbox DNAT chains (CNI-DN-*) of this lab's subnet, left behind when
# sandboxes went without a CNI DEL; the shared CNI-HOSTPORT-* chains stay.
remove_portmap_chains() {
	command -v iptables >/dev/null || return 0
	local prefix=${SUBNET%.*}. chain n=0 num
	for chain in $(iptables -t nat -S 2>/dev/null | awk '/^-N CNI-DN-/ { print $2 }'); do
		iptables -t nat -S "$chain" 2>/dev/null | grep -qF -- "$prefix" || continue
		# by line number: the rules carry quoted comments
		while num=$(iptables -t nat -L CNI-HOSTPORT-DNAT -n --line-numbers 2>/dev/null |
			awk -v c="$chain" '$2 == c { print $1; exit }') && [[ -n "$num" ]]; do
			iptables -t nat -D CNI-HOSTPORT-DNAT "$num" || break
		done
		iptables -t nat -F "$chain" 2>/dev/null || true
		iptables -t nat -X "$chain" 2>/dev/null && n=$((n + 1))
	done
	((n == 0)) || log "removed $n portmap chain(s)"
}

remove_network() {
	remove_portmap_chains
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		local port
		for port in $(ip -o link show master "$BRIDGE" | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
			ip link del "$port" 2>/dev/null || true
		done
		ip link del "$BRIDGE"
		log "deleted bridge $BRIDGE"
	fi
	if [[ -f "$LAB/saved/ip_forward" ]]; then
		cat "$LAB/saved/ip_forward" >/proc/sys/net/ipv4/ip_forward
	fi
}

# Remove the cgroup directories under the lab's own roots (deepest first) — never another
# lab's, a real node's or the system's. rmdir only: a cgroup that still holds a process is
# left alone and reported.
remove_cgroups() {
	local dir n=0 busy=0
	while IFS= read -r dir; do
		[[ -n "$dir" ]] || continue
		if rmdir "$dir" 2>/dev/null; then n=$((n + 1)); else busy=$((busy + 1)); fi
	done < <(lab_cgroup_dirs | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-)
	((n == 0)) || log "removed $n cgroup dir(s) under $(cgroup_roots | paste -sd' ')"
	((busy == 0)) || log "warning: $busy cgroup dir(s) not empty, left in place"
}

cmd_down() {
	init_lab "${1:-}"
	[[ $EUID -eq 0 ]] || die "needs root"
	if [[ ! -d "$LAB" ]]; then
		log "no lab at $LAB"
		return 0
	fi
	[[ -f "$LAB/$MARKER" ]] || die "$LAB is not a lab directory (no $MARKER)"
	local t0
	t0=$(now)
	if [[ -n "$(containerd_pid)" ]] && timeout 3 ctr -a "$SOCK" version >/dev/null 2>&1; then
		remove_through_containerd
	fi
	remove_through_runc
	stop_containerd
	kill_shims
	unmount_all
	remove_network
	remove_cgroups
	remove_stale_shim_sockets
	rm -rf --one-file-system "$LAB"
	log "down in $(since "$t0"): $LAB removed"
}

# ---------------------------------------------------------------------------------------
# status

cmd_status() {
	init_lab "${1:-}"
	if [[ ! -d "$LAB" ]]; then
		echo "lab $LAB: absent"
		return 0
	fi
	local pid
	pid=$(containerd_pid)
	echo "lab:         $LAB"
	echo "endpoint:    unix://$SOCK"
	echo "containerd:  ${pid:-not running}"
	if [[ -n "$pid" ]] && timeout 5 ctr -a "$SOCK" version >/dev/null 2>&1; then
		echo "cri plugin:  $(ctr -a "$SOCK" plugins ls | awk '$2 == "cri" { print $NF }')"
		echo "images:      $(ctr_ images ls -q | tr '\n' ' ')"
		echo "containers:  $(ctr_ containers ls -q | wc -l)"
		echo "tasks:       $(ctr_ tasks ls -q | wc -l) ($(ctr_ tasks ls | awk 'NR > 1 && $3 == "RUNNING"' | wc -l) running)"
	fi
	echo "shims:       $(shim_pids | wc -l)"
	echo "mounts:      $(lab_mounts | wc -l)"
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		echo "bridge:      $BRIDGE ($(ip -o link show master "$BRIDGE" | wc -l) port(s))"
	else
		echo "bridge:      $BRIDGE absent"
	fi
	echo "ip_forward:  $(cat /proc/sys/net/ipv4/ip_forward) (before up: $(cat "$LAB/saved/ip_forward" 2>/dev/null || echo '?'))"
}

# ---------------------------------------------------------------------------------------
# containerd outages (for picolet's runtime-outage scenario)

cmd_containerd() {
	local what=${1:-}
	init_lab "${2:-}"
	[[ -d "$LAB" ]] || die "no lab at $LAB"
	local pid
	pid=$(containerd_pid)
	case "$what" in
	kill)
		[[ -n "$pid" ]] || die "containerd is not running"
		kill -KILL "$pid"
		while [[ -n "$(proc_state "$pid")" && "$(proc_state "$pid")" != Z ]]; do sleep 0.05; done
		log "containerd $pid killed (SIGKILL); $(shim_pids | wc -l) shim(s) left running"
		;;
	stop)
		stop_containerd
		;;
	start)
		start_containerd
		log "containerd $(containerd_pid) started again"
		;;
	*) usage ;;
	esac
}

usage() {
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

case "${1:-}" in
packages) printf '%s\n' "${PACKAGES[@]}" ;;
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
status) cmd_status "${2:-}" ;;
containerd) cmd_containerd "${2:-}" "${3:-}" ;;
*) usage ;;
esac
