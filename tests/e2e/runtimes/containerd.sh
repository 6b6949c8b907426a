# shellcheck shell=bash
# The lab's runtime `containerd` (the default): Debian's containerd 1.6 with the CRI plugin,
# config version 2. Sourced by tests/e2e/lab.sh (which has set LAB, BRIDGE, SUBNET, NS,
# CNI_BIN_DIR, PAUSE_IMAGE and the helpers log, die, proc_state, write_if_changed);
# tests/e2e/runtimes/containerd2.sh builds on it.
#
# Outside $LAB: containerd 1.6 shims put their sockets in /run/containerd/s whatever the
# config says; `down` removes the stale ones of our shims, the directory too if `up` made it.

SOCK="$LAB/containerd.sock"
# The binaries (containerd2.sh points these at its build).
CTRD=containerd
CTR=ctr

rt_packages() {
	# Docker's containerd.io package holds containerd and runc and conflicts with Debian's:
	# where it is installed, it stands in for both (its containerd must still speak config
	# version 2).
	if [[ "$(dpkg-query -W -f='${db:Status-Status}' containerd.io 2>/dev/null || true)" == installed ]]; then
		echo containerd.io
	else
		printf '%s\n' containerd runc
	fi
}

rt_ensure() {
	local f
	for f in "$CTRD" "$CTR" runc; do
		command -v "$f" >/dev/null || die "$f not found in PATH"
	done
	# The config below is containerd 1.x's (version = 2); 2.x reads it differently.
	local v
	v=$("$CTRD" --version 2>/dev/null | awk '{ print $3 }')
	[[ "$v" == v1.[67].* || "$v" == 1.[67].* ]] ||
		die "$(command -v "$CTRD") is containerd '$v'; the lab needs 1.6 or 1.7 (Debian's package containerd)"
}

# containerd 2.x's ctr repeats the daemon's deprecation warnings (cgroup v1 here) on stderr
# for many commands: dropped, the rest of stderr kept.
ctr_() { timeout 20 "$CTR" -a "$SOCK" -n "$NS" "$@" 2> >(grep -v 'msg="DEPRECATION: ' >&2 || true); }

# The config's body: what differs between containerd's config versions.
containerd_config() {
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

  # The lab picolet's image mirror (certs.d/_default/hosts.toml, written by lab.sh).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$LAB/certs.d"
EOF
	containerd_metrics_config
}

# PICOLET_LAB_METRICS=HOST:PORT (optional, read at `up`): containerd's Prometheus endpoint
# (/v1/metrics) there, whose grpc_server_handled_total{grpc_service="runtime.v1.RuntimeService"}
# counts every CRI call the runtime served, by method: the runtime's side of the count
# (benches/kubelet.sh). containerd: [metrics] address, TCP only.
containerd_metrics_config() {
	[[ -n ${PICOLET_LAB_METRICS:-} ]] || return 0
	printf '\n[metrics]\n  address = "%s"\n' "$PICOLET_LAB_METRICS"
}

rt_write_config() {
	mkdir -p "$LAB"/{root,state,opt,runc}
	local cfg
	cfg=$(containerd_config)
	if [[ -f "$LAB/config.toml" && "$(cat "$LAB/config.toml")" != "$cfg" && -n "$(rt_pid)" ]]; then
		die "config changed under a running lab: run '$0 down $LAB' first"
	fi
	write_if_changed "$LAB/config.toml" "$cfg"
	containerd_save_host_state
}

# What `down` puts back (recorded once: a second `up` must not overwrite it).
containerd_save_host_state() {
	if [[ ! -f "$LAB/saved/run_containerd" ]]; then
		if [[ -d /run/containerd ]]; then echo existed; else echo absent; fi >"$LAB/saved/run_containerd"
	fi
}

# The pid of the containerd serving this lab (empty if none). Found through /proc rather
# than a pid file alone, so a stale pid file or a recycled pid can never point elsewhere.
rt_pid() {
	local pid cmd
	for pid in $(pgrep -x containerd || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *"--config $LAB/config.toml"* ]] || continue
		[[ "$(proc_state "$pid")" != Z ]] || continue
		echo "$pid"
		return 0
	done
}

rt_start() {
	local pid log_offset
	log_offset=$(stat -c %s "$LAB/runtime.log" 2>/dev/null || echo 0)
	pid=$(rt_pid)
	if [[ -n "$pid" ]]; then
		log "containerd already running (pid $pid)"
	else
		rm -f "$SOCK" "$SOCK.ttrpc"
		log "starting $(command -v "$CTRD") (log: $LAB/runtime.log)"
		setsid "$CTRD" --config "$LAB/config.toml" </dev/null >>"$LAB/runtime.log" 2>&1 &
	fi

	local i
	for ((i = 0; i < 200; i++)); do
		if [[ -S "$SOCK" ]] && "$CTR" -a "$SOCK" version >/dev/null 2>&1; then
			break
		fi
		if ((i > 10)) && [[ -z "$(rt_pid)" ]]; then
			tail -n 20 "$LAB/runtime.log" >&2 || true
			die "containerd exited during start"
		fi
		sleep 0.05
	done
	((i < 200)) || die "containerd socket $SOCK not answering after 10 s"
	rt_pid >"$LAB/runtime.pid"

	# CRI readiness: the plugin loaded without error (picolet's own client checks the CRI
	# Status conditions RuntimeReady/NetworkReady; there is no crictl here).
	local cri=""
	for ((i = 0; i < 100; i++)); do
		cri=$("$CTR" -a "$SOCK" plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
		[[ "$cri" == ok ]] && break
		sleep 0.05
	done
	if [[ "$cri" != ok ]]; then
		tail -n 20 "$LAB/runtime.log" >&2 || true
		die "CRI plugin status '${cri:-missing}' (expected ok)"
	fi
	local cni_errors
	cni_errors=$(tail -c "+$((log_offset + 1))" "$LAB/runtime.log" | grep -E 'failed to (re)?load cni' || true)
	if [[ -n "$cni_errors" ]]; then
		log "warning: containerd could not load the CNI config:"
		tail -n 1 <<<"$cni_errors" >&2
	fi
}

rt_stop() {
	local pid
	pid=$(rt_pid)
	[[ -z "$pid" ]] || stop_process containerd "$pid" 10
}

rt_kill() {
	local pid
	pid=$(rt_pid)
	[[ -n "$pid" ]] || die "containerd is not running"
	kill_process "$pid"
	log "containerd $pid killed (SIGKILL); $(shim_pids | wc -l) shim(s) left running"
}

rt_import_image() {
	ctr_ images import --snapshotter overlayfs "$2" >/dev/null || die "ctr images import $2 ($1) failed"
}

rt_images() { ctr_ images ls -q; }

# Graceful path while containerd answers: kill and delete every task and container, so the
# shims shut down through containerd (and remove their own sockets).
rt_remove_all() {
	[[ -n "$(rt_pid)" ]] && timeout 3 "$CTR" -a "$SOCK" version >/dev/null 2>&1 || return 0
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
rt_force_remove() {
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

# Shim processes of this lab: their command line carries `-address $SOCK`.
shim_pids() {
	local pid cmd
	for pid in $(pgrep -f '^[^ ]*containerd-shim' || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		[[ "$cmd" == *" $SOCK"* ]] && echo "$pid"
	done
	return 0
}

rt_kill_leftovers() {
	local pids i
	pids=$(shim_pids)
	if [[ -n "$pids" ]]; then
		# shellcheck disable=SC2086 # a list of pids
		kill -KILL $pids 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			[[ -n "$(shim_pids)" ]] || break
			sleep 0.1
		done
		log "killed $(wc -w <<<"$pids") leftover shim(s)"
	fi
	remove_stale_shim_sockets
}

# containerd 1.6 shims listen on /run/containerd/s/<hash> whatever the config says; a shim
# that did not shut down through containerd leaves its socket file. Remove the socket files
# created since `up` that nothing listens on any more.
remove_stale_shim_sockets() {
	[[ -f "$LAB/saved/run_containerd" && -d /run/containerd/s ]] || return 0
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

rt_status_lines() {
	local pid
	pid=$(rt_pid)
	echo "containerd:  ${pid:-not running} ($(command -v "$CTRD"))"
	if [[ -n "$pid" ]] && timeout 5 "$CTR" -a "$SOCK" version >/dev/null 2>&1; then
		echo "cri plugin:  $("$CTR" -a "$SOCK" plugins ls 2>/dev/null | awk '$2 == "cri" { print $NF }')"
		echo "images:      $(ctr_ images ls -q | tr '\n' ' ')"
		echo "containers:  $(ctr_ containers ls -q | wc -l)"
		echo "tasks:       $(ctr_ tasks ls -q | wc -l) ($(ctr_ tasks ls | awk 'NR > 1 && $3 == "RUNNING"' | wc -l) running)"
	fi
	echo "shims:       $(shim_pids | wc -l)"
}
