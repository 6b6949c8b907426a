# shellcheck shell=bash
# The board tests' checks (sourced by smoke.sh and join.sh): PASS/FAIL lines counted in
# `passed` and `failed`, and `g`, a shell string run in the guest of the board at $DIR.
# The sourcing script sets BOARD (board.sh), DIR and REPO, and defines log.

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

# arm64_deb: the package to install — PICOLET_DEB, else picolet's arm64 package built from
# this checkout (packaging/build-all.sh, packaging/deb/mkdeb.sh; CARGO_TARGET_DIR or
# REPO/target). Prints its path.
arm64_deb() {
	if [ -n "${PICOLET_DEB:-}" ]; then
		echo "$PICOLET_DEB"
		return
	fi
	local target=${CARGO_TARGET_DIR:-$REPO/target}
	CARGO_TARGET_DIR=$target nice -n 10 "$REPO/packaging/build-all.sh" \
		--targets aarch64-unknown-linux-musl --static-only-targets none >&2
	CARGO_TARGET_DIR=$target "$REPO/packaging/deb/mkdeb.sh" arm64 "$target/dist/picolet-aarch64-unknown-linux-musl"
}
