#!/usr/bin/env bash
# picolet's test lab: a private CRI runtime instance, fully contained in one directory.
#
#   tests/e2e/lab.sh up     [LAB_DIR]   start it (idempotent); last stdout line = CRI endpoint
#   tests/e2e/lab.sh down   [LAB_DIR]   remove every pod, stop it, leave the machine as it was
#   tests/e2e/lab.sh status [LAB_DIR]   what is running
#   tests/e2e/lab.sh packages          the Debian packages it needs, one per line
#   tests/e2e/lab.sh runtime kill|stop|start [LAB_DIR]
#                                       SIGKILL or stop (SIGTERM) the lab's runtime, leaving
#                                       its pods' shims running; start it again
#                                       (`containerd kill|stop|start` is an alias)
#   tests/e2e/lab.sh image-import FILE [LAB_DIR]
#                                       an OCI archive made by mkimage.py into the runtime
#   tests/e2e/lab.sh runtime-name [LAB_DIR]
#                                       the lab's runtime (containerd, containerd2, crio)
#
# LAB_DIR defaults to <repo>/.lab (git-ignored). Needs root. Follows
# docs/containerd-e2e.md (shared docs): a CRI runtime, runc with cgroupfs, overlayfs, a CNI
# bridge on a private /24, and two local images built by mkimage.py (nothing is ever pulled:
# there is no registry).
#
# Environment (read by `up`, remembered in $LAB/lab.env for the other verbs):
#   PICOLET_LAB_RUNTIME  containerd (default: Debian's 1.6) | containerd2 (2.x built by
#                        tests/upstream/build.sh) | crio; its functions (rt_*) are in
#                        tests/e2e/runtimes/<runtime>.sh, its log is always $LAB/runtime.log
#   PICOLET_LAB_BRIDGE   CNI bridge name       (default picolet0)
#   PICOLET_LAB_SUBNET   pod subnet            (default 10.88.77.0/24)
#   PICOLET_LAB_MIRROR   where the lab's picolet serves its image mirror, which the runtime
#                        is set up to pull through (containerd: certs.d/_default/hosts.toml,
#                        CRI-O: registries.conf mirrors) (default 127.0.0.1:17000+the
#                        subnet's third octet: two labs never share one)
#   PICOLET_LAB_METRICS  containerd 1.6 only, optional: HOST:PORT of its Prometheus endpoint
#                        (CRI calls served, by method; benches/kubelet.sh); not remembered
#
# What `up` changes outside $LAB, and `down` puts back:
#   - net.ipv4.ip_forward (the bridge plugin turns it on): saved at the first `up`, restored;
#   - the bridge interface and the pods' veths: deleted;
#   - cgroup directories under the lab's own cgroup roots (`cgroup_roots`: picolet-e2e-,
#     picolet-demo-, picolet-smoke-<bridge>, where its users put their pods): removed when
#     empty — never another lab's or a real node's;
#   - what the runtime itself leaves outside $LAB (its file says: e.g. containerd 1.6's shim
#     sockets in /run/containerd/s);
#   - missing Debian packages are installed and stay installed.
#
# `down` must work after anything: a failed test, a killed runtime, shims left behind.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
# The runtime's own packages come from rt_packages.
PACKAGES=(containernetworking-plugins busybox-static iptables)
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

# Sets LAB, RUNTIME, SOCK and the remembered settings, and loads the runtime's functions
# (tests/e2e/runtimes/$RUNTIME.sh). $1: optional lab directory.
init_lab() {
	LAB=$(realpath -m "${1:-$REPO/.lab}")
	case "$LAB" in
	/ | /bin* | /boot* | /dev* | /etc* | /lib* | /proc* | /sbin* | /sys* | /usr* | /var/lib)
		die "refusing lab directory $LAB"
		;;
	esac
	RUNTIME=${PICOLET_LAB_RUNTIME:-containerd}
	BRIDGE=${PICOLET_LAB_BRIDGE:-picolet0}
	SUBNET=${PICOLET_LAB_SUBNET:-10.88.77.0/24}
	local octet=${SUBNET#*.*.}
	octet=${octet%%.*}
	MIRROR=${PICOLET_LAB_MIRROR:-127.0.0.1:$((17000 + octet))}
	if [[ -f "$LAB/lab.env" ]]; then
		# shellcheck source=/dev/null
		. "$LAB/lab.env"
	fi
	load_runtime
}

# Sources the runtime's file: it defines the rt_* functions and sets SOCK.
load_runtime() {
	local f="$SCRIPT_DIR/runtimes/$RUNTIME.sh"
	[[ -f "$f" ]] || die "unknown runtime '$RUNTIME' (PICOLET_LAB_RUNTIME: containerd, containerd2 or crio)"
	# shellcheck source=tests/e2e/runtimes/containerd.sh
	. "$f"
}

# Process state letter (R, S, Z...) or empty when gone.
proc_state() { awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null || true; }

# Whether process $1 still lives (not gone, not a zombie).
proc_alive() { [[ -n "$(proc_state "$1")" && "$(proc_state "$1")" != Z ]]; }

# stop_process NAME PID SECS: SIGTERM (and SIGCONT, so that a stopped one gets it too), SIGKILL
# if it still lives after SECS seconds: the runtimes' rt_stop.
stop_process() {
	local i
	kill -TERM "$2" 2>/dev/null || true
	kill -CONT "$2" 2>/dev/null || true
	for ((i = 0; i < $3 * 10; i++)); do
		proc_alive "$2" || break
		sleep 0.1
	done
	if proc_alive "$2"; then
		log "$1 did not stop on SIGTERM in $3 s: SIGKILL"
		kill -KILL "$2" 2>/dev/null || true
	fi
	log "$1 stopped"
}

# kill_process PID: SIGKILL, and wait until it is gone: the runtimes' rt_kill.
kill_process() {
	kill -KILL "$1"
	while proc_alive "$1"; do sleep 0.05; done
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
		for p in $(packages); do
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
	for f in python3 ip; do
		command -v "$f" >/dev/null || die "$f not found in PATH"
	done
	for f in bridge host-local loopback portmap; do
		[[ -x "$CNI_BIN_DIR/$f" ]] || die "CNI plugin $CNI_BIN_DIR/$f missing"
	done
	command -v iptables >/dev/null || die "iptables not found (the portmap plugin needs it)"
	[[ -x /bin/busybox ]] || die "/bin/busybox missing (package busybox-static)"
	rt_ensure
}

# The Debian packages the lab needs: the common ones and the runtime's.
packages() {
	printf '%s\n' "${PACKAGES[@]}"
	rt_packages
}

write_config() {
	mkdir -p "$LAB"/{cni/net.d,cni/ipam,images,saved,certs.d/_default,cdi}
	touch "$LAB/$MARKER"
	printf 'RUNTIME=%q\nBRIDGE=%q\nSUBNET=%q\nSOCK=%q\nMIRROR=%q\n' "$RUNTIME" "$BRIDGE" "$SUBNET" "$SOCK" "$MIRROR" >"$LAB/lab.env"
	# The runtime pulls through the lab picolet's image mirror (containerd's hosts.toml; CRI-O
	# writes its registries.conf itself).
	write_if_changed "$LAB/certs.d/_default/hosts.toml" "$(
		cat <<EOF
# Written by tests/e2e/lab.sh: every registry through the lab picolet's image mirror first.
[host."http://$MIRROR"]
  capabilities = ["pull", "resolve"]
EOF
	)"
	# A runtime may remember more (optional rt_env: lines of NAME=value).
	if declare -F rt_env >/dev/null; then rt_env >>"$LAB/lab.env"; fi
	rt_write_config

	# The network's name is the lab's own: CRI-O garbage-collects CNI attachments at start
	# (libcni GC; for a pre-1.1 config by DEL of every attachment of that network name in the
	# machine-wide result cache, /var/lib/cni, that it does not know) — with one name for all
	# labs, a CRI-O starting in one lab deleted the interfaces of every other lab's pods.
	write_if_changed "$LAB/cni/net.d/10-picolet-lab.conflist" "$(
		cat <<EOF
{
  "cniVersion": "0.4.0",
  "name": "picolet-lab-$BRIDGE",
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
}

import_images() {
	local name file have
	have=$(rt_images)
	for name in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
		file="$LAB/images/${name##*/}"
		file="${file%%:*}.tar"
		# Built and imported by an earlier `up` of this lab: nothing to do.
		[[ -f "$file" ]] && grep -qxF "$name" <<<"$have" && continue
		if [[ "$name" == "$PAUSE_IMAGE" ]]; then
			# The sandbox's only process: sleeps as PID 1 of the pod. It exits on SIGTERM as
			# the real pause does: containerd's StopPodSandbox kills it with SIGKILL, but
			# CRI-O's sends SIGTERM and waits until the call's deadline for it to exit.
			python3 "$SCRIPT_DIR/mkimage.py" --name "$name" -o "$file" \
				--entrypoint /bin/busybox --entrypoint sh --entrypoint=-c \
				--entrypoint 'trap "exit 0" TERM INT; busybox sleep infinity & wait' 2>/dev/null
		else
			python3 "$SCRIPT_DIR/mkimage.py" --name "$name" -o "$file" --cmd sh 2>/dev/null
		fi
		rt_import_image "$name" "$file"
	done
	have=$(rt_images)
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
	rt_start
	import_images
	log "up in $(since "$t0"): $RUNTIME $(rt_pid), bridge $BRIDGE, subnet $SUBNET"
	echo "unix://$SOCK"
}

# ---------------------------------------------------------------------------------------
# down

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
	# Graceful while the runtime answers, then by force through the OCI runtime's own root.
	rt_remove_all
	rt_force_remove
	rt_stop
	rt_kill_leftovers
	unmount_all
	remove_network
	remove_cgroups
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
	echo "lab:         $LAB"
	echo "runtime:     $RUNTIME"
	echo "endpoint:    unix://$SOCK"
	rt_status_lines
	echo "mounts:      $(lab_mounts | wc -l)"
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		echo "bridge:      $BRIDGE ($(ip -o link show master "$BRIDGE" | wc -l) port(s))"
	else
		echo "bridge:      $BRIDGE absent"
	fi
	echo "ip_forward:  $(cat /proc/sys/net/ipv4/ip_forward) (before up: $(cat "$LAB/saved/ip_forward" 2>/dev/null || echo '?'))"
}

# ---------------------------------------------------------------------------------------
# runtime outages (for picolet's runtime-outage scenario), images, the runtime's name

cmd_runtime() {
	local what=${1:-}
	init_lab "${2:-}"
	[[ -d "$LAB" ]] || die "no lab at $LAB"
	local pid
	pid=$(rt_pid)
	case "$what" in
	kill)
		[[ -n "$pid" ]] || die "$RUNTIME is not running"
		rt_kill
		;;
	stop)
		rt_stop
		;;
	start)
		rt_start
		log "$RUNTIME $(rt_pid) started again"
		;;
	*) usage ;;
	esac
}

# An OCI archive made by mkimage.py, into the runtime's image store (under the name in it).
cmd_image_import() {
	local file=${1:-}
	[[ -f "$file" ]] || die "image-import: no file '$file'"
	init_lab "${2:-}"
	local name
	name=$(python3 -c 'import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    idx = json.load(t.extractfile("index.json"))
print(idx["manifests"][0]["annotations"]["io.containerd.image.name"])' "$file") ||
		die "image-import: $file is not an OCI archive of mkimage.py"
	rt_import_image "$name" "$file"
	log "imported $name"
}

usage() {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

case "${1:-}" in
packages)
	RUNTIME=${PICOLET_LAB_RUNTIME:-containerd}
	# The runtime files name paths under the lab as they are read: no lab here.
	LAB=/nonexistent-picolet-lab
	load_runtime
	packages
	;;
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
status) cmd_status "${2:-}" ;;
runtime | containerd) cmd_runtime "${2:-}" "${3:-}" ;;
image-import) cmd_image_import "${2:-}" "${3:-}" ;;
runtime-name)
	init_lab "${2:-}"
	echo "$RUNTIME"
	;;
*) usage ;;
esac
