# shellcheck shell=bash
# The lab's runtime `containerd2`: containerd 2.x (CONTAINERD2_VERSION in
# tests/upstream/versions.sh) built from its Go module by tests/upstream/build.sh — containerd,
# its containerd-shim-runc-v2 and ctr, all three from that build — with runc built by the
# same script (RUNC_VERSION: Debian's 1.1.5 has no idmapped mounts, which user namespaces
# need), config version 3. Everything but the config is containerd.sh's.
#
# Outside $LAB: nothing. containerd 2.x's shim manager takes a socket directory
# (`socket_dir`, default /run/containerd/s): the lab's is $LAB/s. NRI (socket
# /var/run/nri/nri.sock) is disabled; netns mounts are under the state directory; there is
# no debug socket.

# shellcheck source=tests/e2e/runtimes/containerd.sh
. "$SCRIPT_DIR/runtimes/containerd.sh"

SOCK="$LAB/runtime.sock"

# The build's directory (cached after the first `up`): its containerd finds its own shim
# first on PATH, never Debian's 1.6 one.
containerd2_bin_dir() {
	if [[ -z "${CONTAINERD2_BIN_DIR:-}" ]]; then
		CONTAINERD2_BIN_DIR=$("$SCRIPT_DIR/../upstream/build.sh" --path containerd2) ||
			die "tests/upstream/build.sh containerd2 failed"
	fi
	if [[ -z "${RUNC_BIN:-}" ]]; then
		RUNC_BIN=$("$SCRIPT_DIR/../upstream/build.sh" --path runc) ||
			die "tests/upstream/build.sh runc failed"
	fi
	CTRD="$CONTAINERD2_BIN_DIR/containerd"
	CTR="$CONTAINERD2_BIN_DIR/ctr"
	export PATH="$CONTAINERD2_BIN_DIR:$PATH"
}
# A lab that is up knows its build (lab.env): no build.sh call for every verb.
if [[ -n "${CONTAINERD2_BIN_DIR:-}" ]]; then containerd2_bin_dir; fi

rt_packages() { echo runc; }

rt_ensure() {
	command -v runc >/dev/null || die "runc not found in PATH"
	# containerd 2.x refuses a shim socket_dir longer than 42 characters (its restart monitor
	# then fails to load and the CRI plugin reports an error): say so before it starts.
	((${#LAB} + 2 <= 42)) ||
		die "lab directory $LAB is too long for containerd 2.x: its shim socket_dir ($LAB/s) must be at most 42 characters; use a shorter PICOLET_LAB_DIR"
	containerd2_bin_dir
	# shellcheck source=tests/upstream/versions.sh
	. "$SCRIPT_DIR/../upstream/versions.sh"
	local v
	v=$("$CTRD" --version 2>/dev/null | awk '{ print $3 }')
	[[ "$v" == "$CONTAINERD2_VERSION" ]] ||
		die "$CTRD is containerd '$v'; expected $CONTAINERD2_VERSION (tests/upstream/versions.sh)"
	[[ "$(command -v containerd-shim-runc-v2)" == "$CONTAINERD2_BIN_DIR/containerd-shim-runc-v2" ]] ||
		die "containerd-shim-runc-v2 on PATH is not the build's: $(command -v containerd-shim-runc-v2)"
}

# containerd 2.x: config version 3, the CRI plugin split in three (docs/cri/config.md of the
# module: io.containerd.cri.v1.images, io.containerd.cri.v1.runtime, io.containerd.grpc.v1.cri).
containerd_config() {
	cat <<EOF
# Written by tests/e2e/lab.sh: a private containerd 2.x for picolet's tests.
version = 3
root = "$LAB/root"
state = "$LAB/state"

[grpc]
  address = "$SOCK"

[plugins.'io.containerd.internal.v1.opt']
  path = "$LAB/opt"

# containerd 2.x: shim sockets go to socket_dir (default /run/containerd/s).
[plugins.'io.containerd.shim.v1.manager']
  socket_dir = "$LAB/s"

# containerd 2.x: NRI is on by default and listens on /var/run/nri/nri.sock.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"

  # The lab picolet's image mirror (certs.d/_default/hosts.toml, written by lab.sh).
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$LAB/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  # Required here: without CAP_SYS_RESOURCE every RunPodSandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  # CDI: the lab's own spec directory (tests/e2e/run.sh exports it as PICOLET_E2E_CDI_DIR;
  # the device plugin scenario's sample plugin writes its spec there).
  enable_cdi = true
  cdi_spec_dirs = ["$LAB/cdi"]

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC_BIN"
        SystemdCgroup = false
        Root = "$LAB/runc"

    # A second handler name for the runtimeClassName test (the same runc underneath).
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.edge]
      runtime_type = "io.containerd.runc.v2"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.edge.options]
        BinaryName = "$RUNC_BIN"
        SystemdCgroup = false
        Root = "$LAB/runc"

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$CNI_BIN_DIR"]
    conf_dir = "$LAB/cni/net.d"
EOF
}

# containerd 2.x puts nothing in /run/containerd: no host state to record.
containerd_save_host_state() { :; }

# Lines for $LAB/lab.env: the build the lab runs.
rt_env() { printf 'CONTAINERD2_BIN_DIR=%q\nRUNC_BIN=%q\n' "$CONTAINERD2_BIN_DIR" "$RUNC_BIN"; }
