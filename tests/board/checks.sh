# shellcheck shell=bash
# The board tests' checks (sourced by smoke.sh and join.sh): PASS/FAIL lines counted in
# `passed` and `failed`, and `g`, a shell string run in the guest of the board at $DIR.
# The sourcing script sets BOARD (board.sh) and DIR, and defines log.

passed=0
failed=0
pass() {
	passed=$((passed + 1))
	printf 'PASS %s\n' "$*"
}
fail() {
	failed=$((failed + 1))
	printf 'FAIL %s\n' "$*"
}
# check NAME CMD...: one check, on the host.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
# g CMD: a shell string in the guest.
g() { "$BOARD" run "$1" "$DIR"; }
