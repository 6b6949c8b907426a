#!/usr/bin/env bash
# Every test picolet has, in the order a failure is cheapest to find:
#   fmt → clippy → unit + fake-CRI tests → end-to-end against a real containerd → ARM builds.
# Installs what it needs on a fresh Debian machine (run as root). Used by .ci/run and the README.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# A CI run builds once from a clean tree: incremental caches only cost disk (1.6 GB).
export CARGO_INCREMENTAL=0

# Each step is timed; the table is printed at the end, also when a step fails.
ci_start=$(date +%s)
step_name='' step_start=$ci_start timings=()
export PICOLET_CI_TIMINGS
PICOLET_CI_TIMINGS=$(mktemp)
step_end() {
	[[ -n $step_name ]] || return 0
	timings+=("$(printf '%-52s %6ds  %s' "$step_name" "$(($(date +%s) - step_start))" "$1")")
	# packaging/ci.sh writes its own steps' times here: shown under its step.
	if [[ -s $PICOLET_CI_TIMINGS ]]; then
		mapfile -t -O "${#timings[@]}" timings <"$PICOLET_CI_TIMINGS"
		: >"$PICOLET_CI_TIMINGS"
	fi
	step_name=''
}
step() {
	step_end ok
	step_name=$* step_start=$(date +%s)
	printf '\n==> %s\n' "$*"
}
# shellcheck disable=SC2317 # called by the EXIT trap
ci_summary() {
	local rc=$? t
	# A background build still running when a step failed goes with the run.
	[[ -z ${rt_build_pid:-} ]] || kill -- "-$rt_build_pid" 2>/dev/null || true
	step_end "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")"
	printf '\n%-52s %7s  %s\n' step time status
	for t in "${timings[@]}"; do echo "$t"; done
	printf '%-52s %6ds  %s\n' total "$(($(date +%s) - ci_start))" "$( ((rc == 0)) && echo ok || echo FAILED)"
	rm -f "$PICOLET_CI_TIMINGS"
}
trap ci_summary EXIT

# shellcheck source=packaging/lib.sh
. packaging/lib.sh

# Everything the steps below need from Debian, installed first on a fresh machine: the lab's
# containerd and CNI plugins, the packaging tools, and for each ARM target its cross gcc
# *and* its cross libc headers (the headers are only a recommend of the gcc).
mapfile -t apt_pkgs < <(tests/e2e/lab.sh packages)
# The other runtimes' (CRI-O's conmon, skopeo, and what its build needs: libseccomp-dev, gcc).
for rt in containerd2 crio; do
	mapfile -t -O "${#apt_pkgs[@]}" apt_pkgs < <(PICOLET_LAB_RUNTIME=$rt tests/e2e/lab.sh packages)
done
# (a process substitution's failure is silent: check that the lab's answer came)
[[ " ${apt_pkgs[*]} " == *" conmon "* && " ${apt_pkgs[*]} " == *" busybox-static "* ]] ||
	{ echo "ci: tests/e2e/lab.sh packages gave no list" >&2; exit 1; }
apt_pkgs+=(iproute2 shellcheck file binutils qemu-user-static openssl)
for t in "${PICOLET_TARGETS[@]}"; do
	mapfile -t -O "${#apt_pkgs[@]}" apt_pkgs < <(cross_packages_for "$t")
done
step "install: Debian packages, rustfmt, clippy"
apt_ensure "${apt_pkgs[@]}"
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Preflight: name everything that is still missing now, instead of failing deep in a build.
preflight() {
	local missing=() c f t
	for c in cargo rustup rustfmt cargo-clippy python3 go containerd ctr runc ip iptables busybox shellcheck \
		file readelf dpkg-deb tar gzip qemu-aarch64-static qemu-arm-static \
		aarch64-linux-gnu-gcc arm-linux-gnueabihf-gcc; do
		command -v "$c" >/dev/null 2>&1 || missing+=("command $c")
	done
	for f in /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/lib/cni/portmap; do
		[[ -x $f ]] || missing+=("CNI plugin $f")
	done
	for t in "${PICOLET_TARGETS[@]}"; do
		f=$(cross_header_for "$t")
		[[ -f $f ]] || missing+=("cross libc header $f (for $t)")
	done
	# Disk: a run needs about 4 GB under target/ for the host's tests, then (those removed)
	# ~3.1 GB for the ARM release builds' two lanes and ~3 GB for the ARM unit tests, and
	# 2.2 GB for the pinned nightly and the two toolchains of the 32-bit musl C runtime
	# (measured: du -sh target/* ~/.rustup/toolchains/* after a run). Less is named here, not
	# found out as "No space left on device" deep inside a cross build.
	local need_kb=$((9 * 1024 * 1024)) free_kb
	free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
	echo "preflight: $((free_kb / 1024)) MiB free on $(df -P . | awk 'NR == 2 { print $6 }')"
	if ((free_kb < need_kb)); then
		missing+=("disk space: $((free_kb / 1024)) MiB free, a run needs about $((need_kb / 1024)) MiB")
	fi
	if ((${#missing[@]})); then
		printf 'preflight: missing %s\n' "${missing[@]}" >&2
		return 1
	fi
	echo "preflight: every tool, plugin and header is there"
	# The node API's e2e checks use the real kubectl, which no Debian package provides
	# (this machine image carries one); without it they skip, saying so.
	if command -v kubectl >/dev/null 2>&1; then
		echo "preflight: kubectl $(kubectl version --client 2>/dev/null | head -1)"
	else
		echo "preflight: NOTE no kubectl: e2e scenario m skips its kubectl checks" >&2
	fi
}
step "preflight"
preflight

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --all-targets --all-features -- -D warnings

# Every feature set the packaging builds (packaging/lib.sh variant_feature_flags) compiles:
# the release builds in CI are the full and static-only ones, the others are the size
# table's (packaging/build-all.sh, by hand). ~1 min.
step "cargo check: each default feature left out"
for f in $(default_features); do
	# shellcheck disable=SC2046 # word-split on purpose: the flags
	cargo check --lib --bins $(variant_feature_flags "-$f")
done

step "shellcheck"
shellcheck -x .ci/run tests/*.sh tests/e2e/*.sh tests/e2e/runtimes/*.sh tests/upstream/*.sh tests/cluster/*.sh tests/conformance/*.sh tests/conformance/bin/* tests/board/*.sh tests/board/initramfs-tools/hooks/board tests/fuzz/*.sh benches/*.sh

step "unit and fake-CRI tests"
cargo test --all-features

# Go builds the upstream components the tests meet (tests/upstream/): its caches stay
# outside the checkout, and a second run builds nothing. crictl checks the lab from outside.
step "upstream: Go and crictl from the Go module proxy"
go version
PICOLET_CRICTL=$(tests/upstream/build.sh --path crictl)
export PICOLET_CRICTL

# The design's other runtimes, built from their Go modules (tests/upstream/versions.sh), in
# the background while the two next steps (a fuzzer on one core, then the e2e suite, which
# mostly waits for containers) leave a core free: cold, the two builds take some 12 min.
rt_build_log=$(mktemp)
# (its own session: a failed run stops the whole build, see ci_summary)
setsid nice -n 5 tests/upstream/build.sh containerd2 runc crio >"$rt_build_log" 2>&1 &
rt_build_pid=$!

# The fuzz targets for a short while each (the long runs are tests/fuzz/run.sh 600).
step "fuzz smoke: manifest loader and node API requests, 30 s each"
tests/fuzz/run.sh 30

step "end-to-end against a real containerd"
bash tests/e2e/run.sh

# The same suite on the other runtimes. A short lab directory: containerd 2.x's shim socket
# directory must fit in 42 characters wherever the checkout is.
step "upstream: containerd 2.x and CRI-O from the Go module proxy (built in the background)"
rt_build_rc=0
wait "$rt_build_pid" || rt_build_rc=$?
rt_build_pid=''
cat "$rt_build_log"
rm -f "$rt_build_log"
((rt_build_rc == 0)) || { echo "ci: tests/upstream/build.sh containerd2 runc crio failed (exit $rt_build_rc)" >&2; exit 1; }

# containerd 2.x and CRI-O side by side (~6 min saved): each lab its own directory, bridge,
# subnet (so its own cgroup roots, host ports and mirror port, see tests/e2e/lab.sh) — the
# labs are made to share a machine. Each run's output goes to a file, shown whole afterwards.
step "end-to-end against containerd 2.x and CRI-O (side by side)"
e2e_side_by_side() {
	local rt=$1 bridge=$2 subnet=$3 log=$4
	PICOLET_LAB_DIR=/tmp/pci-$rt-$$ PICOLET_LAB_BRIDGE=$bridge PICOLET_LAB_SUBNET=$subnet \
		bash tests/e2e/run.sh --runtime "$rt" >"$log" 2>&1
}
# The test binaries once, before the two runs race for cargo's lock.
cargo test --features fake-cri --test e2e --no-run
cargo test --features mock-apiserver --test e2e_api --no-run
e2e_logs=()
e2e_pids=()
e2e_rcs=()
for spec in "containerd2 picoci2 10.88.78.0/24" "crio picoci3 10.88.79.0/24"; do
	read -r rt bridge subnet <<<"$spec"
	e2e_logs+=("$(mktemp)")
	e2e_side_by_side "$rt" "$bridge" "$subnet" "${e2e_logs[-1]}" &
	e2e_pids+=("$!")
done
e2e_failed=0
for i in "${!e2e_pids[@]}"; do
	rc=0
	wait "${e2e_pids[$i]}" || rc=$?
	e2e_rcs+=("$rc")
	((rc == 0)) || e2e_failed=1
done
for i in "${!e2e_logs[@]}"; do
	printf '\n==> end-to-end against %s (exit %s)\n' "$( ((i == 0)) && echo "containerd 2.x" || echo CRI-O)" "${e2e_rcs[$i]}"
	cat "${e2e_logs[$i]}"
	rm -f "${e2e_logs[$i]}"
done
((e2e_failed == 0)) || { echo "ci: end-to-end: containerd 2.x exit ${e2e_rcs[0]}, CRI-O exit ${e2e_rcs[1]}" >&2; exit 1; }
# The x86_64 test build is not needed by the ARM steps; on a small disk its space is.
if [[ "${CI:-}" == true ]]; then
	rm -rf target/debug
fi

if [[ -x packaging/ci.sh ]]; then
  step "ARM builds, size budget, packages"
  bash packaging/ci.sh
fi
step "all tests passed"
