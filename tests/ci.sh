#!/usr/bin/env bash
# Every test picolet has, in the order a failure is cheapest to find:
#   fmt → clippy → unit + fake-CRI tests → end-to-end against a real containerd → ARM builds.
# Installs what it needs on a fresh Debian machine (run as root). Used by .ci/run and the README.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

need_apt=()
for pkg in containerd runc containernetworking-plugins busybox-static iproute2 shellcheck; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  step "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --all-targets --all-features -- -D warnings

step "shellcheck"
shellcheck -x .ci/run tests/*.sh tests/e2e/*.sh benches/run.sh

step "unit and fake-CRI tests"
cargo test --all-features

step "end-to-end against a real containerd"
bash tests/e2e/run.sh

if [[ -x packaging/ci.sh ]]; then
  step "ARM builds, size budget, packages"
  bash packaging/ci.sh
fi
step "all tests passed"
