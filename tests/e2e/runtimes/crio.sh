# shellcheck shell=bash
# CRI-O as the lab's runtime (sourced by tests/e2e/lab.sh when PICOLET_LAB_RUNTIME=crio).
#
# crio and pinns are built from CRI-O's Go module by tests/upstream/build.sh (CRIO_VERSION in
# tests/upstream/versions.sh), and runc too (RUNC_VERSION: Debian's 1.1.5 has no idmapped
# mounts, so CRI-O would report no user-namespace support); conmon, crun and skopeo come from
# Debian. Everything is
# private to $LAB: config (crio.conf, an empty drop-in dir), containers-storage root and
# runroot, socket, version and clean-shutdown files, exits/attach/namespaces dirs, pod logs,
# signature policy, registries.conf (no search registries), runc/crun roots, CNI conf/cache.
# Nothing touches /etc/crio, /etc/containers, /var/lib/containers or a system CRI-O.
#
# Uses lab.sh's LAB, BRIDGE, SUBNET, CNI_BIN_DIR, PAUSE_IMAGE, log and die; sets SOCK.

SOCK="$LAB/runtime.sock"
CRIO_STORAGE_DRIVER=overlay

# Also what tests/upstream/build.sh needs to build crio (cgo with libseccomp) and pinns (C),
# so that `up` on a fresh machine builds it.
rt_packages() {
	printf '%s\n' conmon runc crun skopeo containernetworking-plugins busybox-static iptables libseccomp2 \
		libseccomp-dev pkg-config gcc make libc6-dev
}

# The built crio (tests/upstream/build.sh crio): $LAB/bin/{crio,pinns} link to it.
rt_ensure() {
	local bin f
	bin=$("$REPO/tests/upstream/build.sh" --path crio) || die "tests/upstream/build.sh crio failed"
	mkdir -p "$LAB/bin"
	ln -sf "$bin" "$LAB/bin/crio"
	ln -sf "${bin%/*}/pinns" "$LAB/bin/pinns"
	RUNC_BIN=$("$REPO/tests/upstream/build.sh" --path runc) || die "tests/upstream/build.sh runc failed"
	for f in conmon runc crun skopeo; do
		command -v "$f" >/dev/null || die "$f not found in PATH"
	done
	[[ -x "$LAB/bin/pinns" ]] || die "no pinns next to $bin"
}

# $LAB/bin/runc and $LAB/bin/crun: the lab's OCI runtimes, wrapping Debian's. Lab only: they
# make up for this machine's capability bounding set, which lacks CAP_SYS_RESOURCE (a real
# node has it) and which CRI-O, unlike containerd, does not look at:
# - oom_score_adj: CRI-O has no `restrict_oom_score_adj` (containerd's lab option,
#   docs/containerd-e2e.md): its sandbox spec asks for oom_score_adj -998, a Guaranteed
#   container's for -997, and runc then fails with "failed to update
#   /proc/self/oom_score_adj: Permission denied". On `create`, a spec's oomScoreAdj below
#   the runtime's own is raised to its own, as containerd's option does.
# - capabilities: for a privileged container CRI-O asks for every capability the kernel
#   knows (cri-o internal/factory/container: SetupPrivileged), containerd for those its own
#   process has (oci.WithAllCurrentCapabilities); with one missing from the bounding set runc
#   fails with "unable to apply caps: can't apply capabilities: operation not permitted". On
#   `create` (the bundle's config.json) and `exec` (its --process file), capabilities outside
#   the runtime's bounding set are dropped, which is what containerd gives.
# A call without --root gets the lab's root.
crio_write_wrappers() {
	local rt real
	for rt in runc crun; do
		real=$(command -v "$rt") || die "$rt not found in PATH"
		if [[ $rt == runc ]]; then
			real=${RUNC_BIN:-$("$REPO/tests/upstream/build.sh" --path runc)} || die "tests/upstream/build.sh runc failed"
		fi
		write_if_changed "$LAB/bin/$rt" "$(
			cat <<EOC
#!/bin/sh
# Written by tests/e2e/runtimes/crio.sh: $real, with containerd's restrict_oom_score_adj and
# privileged capabilities (this machine's bounding set lacks CAP_SYS_RESOURCE).
cmd=
spec=
prev=
for a in "\$@"; do
	case "\$prev" in
	--bundle | -b) spec=\$a/config.json ;;
	--process | -p) spec=\$a ;;
	esac
	case "\$a" in create | exec) [ -n "\$cmd" ] || cmd=\$a ;; esac
	prev=\$a
done
if [ -n "\$cmd" ] && [ -f "\$spec" ]; then
	python3 - "\$cmd" "\$spec" <<'PY' || exit 1
import json, sys
cmd, path = sys.argv[1], sys.argv[2]
# Capability numbers 0..40 (linux/capability.h), by name.
NAMES = """chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap
linux_immutable net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner
sys_module sys_rawio sys_chroot sys_ptrace sys_pacct sys_admin sys_boot sys_nice
sys_resource sys_time sys_tty_config mknod lease audit_write audit_control setfcap
mac_override mac_admin syslog wake_alarm block_suspend audit_read perfmon bpf
checkpoint_restore""".split()
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
bounding = int(status["CapBnd"].strip(), 16)
missing = {"CAP_" + n.upper() for i, n in enumerate(NAMES) if not bounding >> i & 1}
spec = json.load(open(path))
proc = (spec.get("process") or {}) if cmd == "create" else spec
changed = False
if cmd == "create":
    own = int(open("/proc/self/oom_score_adj").read())
    if proc.get("oomScoreAdj") is not None and proc["oomScoreAdj"] < own:
        proc["oomScoreAdj"] = own
        changed = True
for kind, caps in (proc.get("capabilities") or {}).items():
    kept = [c for c in caps or [] if c not in missing]
    if caps and kept != caps:
        proc["capabilities"][kind] = kept
        changed = True
if changed:
    json.dump(spec, open(path, "w"))
PY
fi
# Its own root unless CRI-O names one: crun makes its default root (/run/crun) on any call,
# even the --version and features probes CRI-O runs at start.
case " \$* " in *" --root "*) exec $real "\$@" ;; esac
exec $real --root "$LAB/$rt" "\$@"
EOC
		)"
		chmod 0755 "$LAB/bin/$rt"
	done
}

# containers-storage, as CRI-O and skopeo both address it (skopeo's transport spec).
crio_store() { printf '[%s@%s+%s]' "$CRIO_STORAGE_DRIVER" "$LAB/storage/root" "$LAB/storage/run"; }

rt_write_config() {
	mkdir -p "$LAB"/{bin,crio.conf.d,registries.conf.d,policies,tmp,storage/root,storage/run,lib,run/exits,run/attach,run/ns,pod-logs,runc,crun,cni/net.d,cni/ipam,cni/cache,images}
	if [[ ! -f "$LAB/saved/crio_hostport_chains" ]]; then
		if crio_hostport_chains_existed; then echo existed; else echo absent; fi >"$LAB/saved/crio_hostport_chains"
	fi
	crio_write_wrappers
	write_if_changed "$LAB/policy.json" '{ "default": [{ "type": "insecureAcceptAnything" }] }'
	# No search registries: a short name never resolves (as with containerd, use localhost/...).
	# Docker Hub through the lab picolet's image mirror (CRI-O: a mirror per registry prefix;
	# the registry as the mirror's first path component, which picolet's mirror reads).
	write_if_changed "$LAB/registries.conf" "$(
		cat <<EOC
unqualified-search-registries = []

[[registry]]
prefix = "docker.io"
location = "docker.io"

[[registry.mirror]]
location = "$MIRROR/docker.io"
insecure = true
EOC
	)"
	# containers/storage reads this before CRI-O's own settings (and skopeo reads it): private.
	write_if_changed "$LAB/storage.conf" "$(
		cat <<EOC
[storage]
driver = "$CRIO_STORAGE_DRIVER"
graphroot = "$LAB/storage/root"
runroot = "$LAB/storage/run"
EOC
	)"
	local cfg
	cfg=$(
		cat <<EOC
# Written by tests/e2e/runtimes/crio.sh: a private CRI-O for picolet's tests.
[crio]
root = "$LAB/storage/root"
runroot = "$LAB/storage/run"
storage_driver = "$CRIO_STORAGE_DRIVER"
log_dir = "$LAB/pod-logs"
version_file = "$LAB/run/version"
version_file_persist = "$LAB/lib/version"
clean_shutdown_file = "$LAB/lib/clean.shutdown"

[crio.api]
listen = "$SOCK"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon = "$(command -v conmon)"
conmon_cgroup = "pod"
container_exits_dir = "$LAB/run/exits"
container_attach_socket_dir = "$LAB/run/attach"
namespaces_dir = "$LAB/run/ns"
pinns_path = "$LAB/bin/pinns"
# CRI-O: GetContainerEvents streams only with this on (picolet's evented PLEG).
enable_pod_events = true
# CDI: the lab's own spec directory (see containerd2.sh).
cdi_spec_dirs = ["$LAB/cdi"]
# Not touched on this machine: irqbalance's files in /etc/sysconfig.
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
log_to_journald = false

[crio.runtime.runtimes.runc]
runtime_path = "$LAB/bin/runc"
runtime_type = "oci"
runtime_root = "$LAB/runc"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"

# CRI-O always has a "crun" handler (rooted in /run/crun unless told): kept private too.
[crio.runtime.runtimes.crun]
runtime_path = "$LAB/bin/crun"
runtime_type = "oci"
runtime_root = "$LAB/crun"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"

# A second handler name for picolet's runtimeClassName test: runc again, as in the
# containerd lab (Debian's crun 1.8.1 refuses CRI-O 1.36's specs: "unknown version specified").
[crio.runtime.runtimes.edge]
runtime_path = "$LAB/bin/runc"
runtime_type = "oci"
runtime_root = "$LAB/runc"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"

[crio.image]
pause_image = "$PAUSE_IMAGE"
# The lab's pause image has no /pause: its entrypoint (busybox sh, sleeping, exits on TERM) runs.
pause_command = ""
signature_policy = "$LAB/policy.json"
signature_policy_dir = "$LAB/policies"
big_files_temporary_dir = "$LAB/tmp"

[crio.network]
network_dir = "$LAB/cni/net.d/"
plugin_dirs = ["$CNI_BIN_DIR"]

[crio.nri]
enable_nri = false

[crio.metrics]
enable_metrics = false
EOC
	)
	if [[ -f "$LAB/crio.conf" && "$(cat "$LAB/crio.conf")" != "$cfg" && -n "$(rt_pid)" ]]; then
		die "config changed under a running lab: run '$0 down $LAB' first"
	fi
	write_if_changed "$LAB/crio.conf" "$cfg"
}

# The environment every crio and skopeo of the lab runs with: private containers configs.
CRIO_ENV=(CONTAINERS_STORAGE_CONF="$LAB/storage.conf" CONTAINERS_REGISTRIES_CONF="$LAB/registries.conf"
	CONTAINERS_POLICY_JSON="$LAB/policy.json")
crio_env() { env "${CRIO_ENV[@]}" "$@"; }

# The pid of the crio serving this lab (empty if none), found by its --config path.
rt_pid() {
	local pid cmd
	for pid in $(pgrep -x crio || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *"--config $LAB/crio.conf "* ]] || continue
		[[ "$(proc_state "$pid")" != Z ]] || continue
		echo "$pid"
		return 0
	done
}

cri_() { timeout 30 python3 "$SCRIPT_DIR/cri.py" -e "unix://$SOCK" "$@"; }

# Starts crio (unless running) and waits for CRI Status RuntimeReady + NetworkReady.
rt_start() {
	local pid i
	pid=$(rt_pid)
	if [[ -n "$pid" ]]; then
		log "crio already running (pid $pid)"
	else
		rm -f "$SOCK"
		log "starting crio (log: $LAB/runtime.log)"
		# A simple command (no function) in the background: bash execs it, no shell waits on it
		# holding the caller's stdout.
		# CRI-O reads registries.conf from --registries-conf (its env is CONTAINER_REGISTRIES_CONF,
		# not containers/image's CONTAINERS_REGISTRIES_CONF), the drop-ins from an empty dir.
		setsid env "${CRIO_ENV[@]}" "$LAB/bin/crio" --config "$LAB/crio.conf" --config-dir "$LAB/crio.conf.d" \
			--registries-conf "$LAB/registries.conf" --registries-conf-dir "$LAB/registries.conf.d" \
			--log-level "${PICOLET_CRIO_LOG_LEVEL:-info}" </dev/null >>"$LAB/runtime.log" 2>&1 &
	fi
	for ((i = 0; i < 600; i++)); do
		[[ -S "$SOCK" ]] && cri_ status >/dev/null 2>&1 && break
		if ((i > 20)) && [[ -z "$(rt_pid)" ]]; then
			tail -n 20 "$LAB/runtime.log" >&2 || true
			die "crio exited during start"
		fi
		sleep 0.1
	done
	((i < 600)) || die "crio on $SOCK not ready (CRI Status) after 60 s"
	rt_pid >"$LAB/runtime.pid"
}

# SIGTERM: CRI-O stops, writes its clean-shutdown file; conmon keeps the containers running.
rt_stop() {
	local pid
	pid=$(rt_pid)
	[[ -z "$pid" ]] || stop_process crio "$pid" 15
}

rt_kill() {
	local pid
	pid=$(rt_pid)
	[[ -n "$pid" ]] || die "crio is not running"
	kill_process "$pid"
	log "crio $pid killed (SIGKILL); $(crio_conmon_pids | wc -l) conmon(s) left running"
}

# rt_import_image NAME FILE: an OCI archive (mkimage.py) into the private containers-storage.
# CRI-O: there is no import RPC; skopeo copies into the store CRI-O reads (crio may run: the
# store is locked per operation, and CRI-O sees new images on its next lookup).
rt_import_image() {
	crio_env skopeo --registries-conf "$LAB/registries.conf" copy --quiet \
		--policy "$LAB/policy.json" "oci-archive:$2" "containers-storage:$(crio_store)$1" >&2
}

# The images in the store, one name per line.
rt_images() {
	local name
	for name in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
		crio_env skopeo inspect --raw "containers-storage:$(crio_store)$name" >/dev/null 2>&1 && echo "$name"
	done
	return 0
}

# Graceful path while crio answers: every sandbox stopped and removed through CRI, its
# processes killed first (CRI-O's StopPodSandbox sends SIGTERM and waits out the deadline
# for what ignores it; conmon reports the SIGKILL to CRI-O as an exit).
rt_remove_all() {
	local out rt id
	[[ -n "$(rt_pid)" ]] && cri_ status >/dev/null 2>&1 || return 0
	for rt in runc crun; do
		[[ -d "$LAB/$rt" ]] || continue
		for id in $("$rt" --root "$LAB/$rt" list -q 2>/dev/null || true); do
			"$rt" --root "$LAB/$rt" kill "$id" KILL >/dev/null 2>&1 || true
		done
	done
	out=$(cri_ rm-pods 2>/dev/null || true)
	[[ -z "$out" ]] || log "removed $(wc -l <<<"$out") sandbox(es) through CRI-O"
}

# Brute-force path (crio dead or stuck): the OCI runtimes' own state under $LAB.
rt_force_remove() {
	local rt root id n=0
	for rt in runc crun; do
		root="$LAB/$rt"
		[[ -d "$root" ]] || continue
		for id in $("$rt" --root "$root" list -q 2>/dev/null || true); do
			"$rt" --root "$root" delete --force "$id" >/dev/null 2>&1 || true
			n=$((n + 1))
		done
	done
	((n == 0)) || log "force-deleted $n container(s) through runc/crun"
}

# conmon processes of this lab: their command line names its exits directory.
crio_conmon_pids() {
	local pid cmd
	for pid in $(pgrep -x conmon || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *" $LAB/run/exits "* ]] && echo "$pid"
	done
	return 0
}

rt_kill_leftovers() {
	local pids i
	pids=$(crio_conmon_pids)
	if [[ -n "$pids" ]]; then
		# shellcheck disable=SC2086 # a list of pids
		kill -KILL $pids 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			[[ -n "$(crio_conmon_pids)" ]] || break
			sleep 0.1
		done
		log "killed $(wc -w <<<"$pids") leftover conmon(s)"
	fi
	crio_remove_hostport_chains
}

# CRI-O maps host ports itself (not through CNI portmap): nat chains KUBE-HOSTPORTS and
# CRIO-HOSTPORTS-MASQ with jumps from PREROUTING, OUTPUT and POSTROUTING, made at its first
# host port and left when it stops (the per-pod KUBE-HP-*/CRIO-MASQ-* chains go with their
# sandboxes). Removed when `up` did not find them and they are empty again — never while
# another CRI-O's pods use them.
crio_hostport_chains_existed() { iptables -t nat -S KUBE-HOSTPORTS >/dev/null 2>&1; }
crio_remove_hostport_chains() {
	[[ "$(cat "$LAB/saved/crio_hostport_chains" 2>/dev/null || true)" == absent ]] || return 0
	command -v iptables >/dev/null || return 0
	crio_hostport_chains_existed || return 0
	local chain
	for chain in KUBE-HOSTPORTS CRIO-HOSTPORTS-MASQ; do
		[[ "$(iptables -t nat -S "$chain" 2>/dev/null | grep -c '^-A')" == 0 ]] || return 0
	done
	iptables -t nat -D PREROUTING -m comment --comment "kube hostport portals" -m addrtype --dst-type LOCAL -j KUBE-HOSTPORTS 2>/dev/null || true
	iptables -t nat -D OUTPUT -m comment --comment "kube hostport portals" -m addrtype --dst-type LOCAL -j KUBE-HOSTPORTS 2>/dev/null || true
	iptables -t nat -D POSTROUTING -m comment --comment "kube hostport masquerading" -m conntrack --ctstate DNAT -j CRIO-HOSTPORTS-MASQ 2>/dev/null || true
	iptables -t nat -X KUBE-HOSTPORTS 2>/dev/null || true
	iptables -t nat -X CRIO-HOSTPORTS-MASQ 2>/dev/null || true
	log "removed CRI-O's host port chains (KUBE-HOSTPORTS, CRIO-HOSTPORTS-MASQ)"
}

rt_status_lines() {
	local pid
	pid=$(rt_pid)
	echo "crio:        ${pid:-not running} ($("$LAB/bin/crio" --version 2>/dev/null | awk 'NR == 1 { print $3 }'))"
	if [[ -n "$pid" ]] && cri_ status >/dev/null 2>&1; then
		echo "images:      $(rt_images | tr '\n' ' ')"
		echo "sandboxes:   $(cri_ pods | wc -l)"
	fi
	echo "conmons:     $(crio_conmon_pids | wc -l)"
}
