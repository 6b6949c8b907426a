#!/usr/bin/env bash
# picolet on each CRI runtime of the lab, beside the raw CRI client on the same runtime:
# pod start (1 and 20 pods), RSS, and idle cost.
#
#   sudo benches/runtimes.sh [--runtimes "containerd containerd2 crio"] [--reps 3]
#                            [--pods 50] [--idle-secs 600] [--out DIR]
#
# For each runtime, one after the other: tests/e2e/lab.sh up with PICOLET_LAB_RUNTIME set (its
# own directory, bridge picobench<i> and subnet 10.88.11<i>.0/24), the bench's `containerd`
# mode against it (`--label <runtime>`: any CRI endpoint), lab.sh down. The raw CRI client
# and picolet run against the same runtime, alternating. Prints one table per section;
# RESULT lines in OUT/results.tsv (default /tmp/picolet-bench-runtimes). The idle window runs
# twice per runtime (picolet running, then stopped), so --idle-secs 600 takes 20 min each.
set -euo pipefail
cd "$(dirname "$0")/.."

runtimes="containerd containerd2 crio"
reps=3
pods=50
idle=600
OUT=/tmp/picolet-bench-runtimes
while (($#)); do
	case "$1" in
	--runtimes) runtimes=$2; shift ;;
	--reps) reps=$2; shift ;;
	--pods) pods=$2; shift ;;
	--idle-secs) idle=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "runtimes.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[[ $EUID -eq 0 ]] || { echo "runtimes.sh: needs root (the lab)" >&2; exit 1; }

log() { printf 'runtimes.sh: %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/bin"
RESULTS=$OUT/results.tsv
: >"$RESULTS"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
log "cargo build --release; cargo bench --features fake-cri --bench picolet --no-run"
nice -n 10 cargo build --locked --release 2>&1 | tail -n 1 >&2
cp "$CARGO_TARGET_DIR/release/picolet" "$OUT/bin/picolet"
BENCH=$(nice -n 10 cargo bench --locked --features fake-cri --bench picolet --no-run 2>&1 |
	tee "$OUT/logs/bench-build.log" | sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -n 1)
[[ -x "$BENCH" ]] || { cat "$OUT/logs/bench-build.log" >&2; exit 1; }

LAB=
# shellcheck disable=SC2317 # called by the EXIT trap
teardown() { [[ -z $LAB ]] || tests/e2e/lab.sh down "$LAB" >>"$OUT/logs/lab.log" 2>&1 || log "lab.sh down $LAB failed"; }
trap teardown EXIT

i=0
for rt in $runtimes; do
	i=$((i + 1))
	# Short: containerd 2.x's shim socket directory ($LAB/s) must fit in 42 characters.
	LAB=/tmp/picolet-bench-lab-$rt
	log "$rt: lab up ($LAB, load $(load))"
	if ! endpoint=$(PICOLET_LAB_RUNTIME=$rt PICOLET_LAB_BRIDGE=picobench$i PICOLET_LAB_SUBNET=10.88.11$i.0/24 \
		tests/e2e/lab.sh up "$LAB" 2>>"$OUT/logs/lab.log" | tail -n 1); then
		log "$rt: lab.sh up failed: $OUT/logs/lab.log"
		tests/e2e/lab.sh down "$LAB" >>"$OUT/logs/lab.log" 2>&1 || log "$rt: lab.sh down failed"
		LAB=''
		printf 'RESULT\t%s\t%s\t%s\t%s\t%s\n' "pod start ($rt)" "lab" "failed" "see $OUT/logs/lab.log" "$(load)" >>"$RESULTS"
		continue
	fi
	l=$(load)
	log "$rt: bench (load $l)"
	if ! "$BENCH" containerd --picolet "$OUT/bin/picolet" --endpoint "$endpoint" --label "$rt" \
		--counts 1,20 --reps "$reps" --rss-pods "$pods" --idle-secs "$idle" \
		--containerd-pid "$(cat "$LAB/runtime.pid")" 2>"$OUT/logs/bench-$rt.log" |
		awk -v l="$l" -F'\t' '$1 == "RESULT" { print $0 "\t" l }' >>"$RESULTS"; then
		log "$rt: bench failed: $OUT/logs/bench-$rt.log"
	fi
	tests/e2e/lab.sh down "$LAB" >>"$OUT/logs/lab.log" 2>&1 || log "$rt: lab.sh down failed"
	LAB=
done

awk -F'\t' -f benches/table.awk "$RESULTS" | tee "$OUT/table.md"
log "results: $OUT/table.md"
