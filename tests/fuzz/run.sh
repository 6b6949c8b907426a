#!/usr/bin/env bash
# The fuzz targets under cargo-fuzz (libFuzzer), each for a while from its seeds:
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]      default: 30 s each, targets manifest node_api
#
# A smoke in tests/ci.sh (30 s each); the long runs (600 s each) are the README's command.
# Installs what it needs: the pinned nightly (the machine's own `nightly` when it is that
# build) and cargo-fuzz from crates.io. Corpora grow in target/fuzz/corpus/<target> (kept
# between runs, never committed); a crash or timeout leaves its input in
# target/fuzz/artifacts/<target> and fails the run. Prints each target's final stats.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-30}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(manifest node_api)

# A nightly pinned by date (cargo-fuzz needs -Z flags); the machine image's `nightly` is it.
PINNED=nightly-2026-05-20
PINNED_COMMIT=e50aa6fba
if rustup run nightly rustc --version 2>/dev/null | grep -q "$PINNED_COMMIT"; then
	TOOLCHAIN=nightly
else
	rustup toolchain list | grep -q "^$PINNED" ||
		rustup toolchain install "$PINNED" --profile minimal >/dev/null
	TOOLCHAIN=$PINNED
fi
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
	cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/fuzz
# -s none: no sanitizer, so that -rss_limit_mb measures what the code itself needs.
cargo "+$TOOLCHAIN" fuzz build --fuzz-dir tests/fuzz -s none -O
for t in "${TARGETS[@]}"; do
	corpus="$CARGO_TARGET_DIR/corpus/$t"
	artifacts="$CARGO_TARGET_DIR/artifacts/$t/"
	mkdir -p "$corpus" "$artifacts"
	echo "==> fuzz $t for ${SECONDS_EACH}s"
	log="$CARGO_TARGET_DIR/$t.log"
	if ! cargo "+$TOOLCHAIN" fuzz run --fuzz-dir tests/fuzz -s none -O "$t" "$corpus" "tests/fuzz/seeds/$t" -- \
		-max_total_time="$SECONDS_EACH" -timeout=2 -rss_limit_mb=256 -max_len=65536 \
		-artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		echo "fuzz $t: FAILED (input in $artifacts)" >&2
		exit 1
	fi
	grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|slowest_unit_time_sec|peak_rss_mb)' "$log" |
		sed "s/^/fuzz $t: /"
done
