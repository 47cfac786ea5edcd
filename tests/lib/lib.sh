# SPDX-License-Identifier: MIT
# Shell helpers for integration tests: TAP output (ply's "case || fail"
# style), skipping with a reason, and cleanup of what a test started.
#   . "$(dirname "$0")/../lib/lib.sh"
# FAY_TEST_KEEP=1 keeps the test's temporary directory (logs, databases).
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${FAY_BUILD:-$TOP/build}
FAY=${FAY:-$BUILD/fay}
T_N=0
T_FAILED=0
T_PIDS=()
T_TMP=$(mktemp -d /tmp/fay-test.XXXXXX)

# ok "what" cmd...: runs cmd, one TAP line; passes if cmd exits 0, and
# returns that verdict, so a test can stop where going on makes no sense
# (ok "builds" make ... || { done_testing; exit; }).  cmd is ONE command:
# in `ok "x" [ a ] && [ b ]` the shell runs [ b ] after ok, unchecked;
# write a compound check as ok "x" bash -c '[ "$1" ] && [ "$2" ]' _ a b.
ok() {
	local what=$1; shift
	T_N=$((T_N + 1))
	if "$@"; then
		echo "ok $T_N - $what"
		return 0
	fi
	T_FAILED=$((T_FAILED + 1))
	echo "not ok $T_N - $what"
	return 1
}

pass() { T_N=$((T_N + 1)); echo "ok $T_N - $1"; }
fail() { T_N=$((T_N + 1)); T_FAILED=$((T_FAILED + 1)); echo "not ok $T_N - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
diag() { echo "# $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }

need_root() { [ "$(id -u)" -eq 0 ] || skip_all "needs root"; }

# bg cmd...: start in the background, remember the pid for cleanup.
bg() { "$@" & T_PIDS+=($!); }

# A free TCP port on 127.0.0.1.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for SECONDS cmd...: poll until cmd succeeds.
wait_for() {
	local t=$1; shift
	local end=$((SECONDS + t))
	while [ $SECONDS -lt $end ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

t_cleanup() {
	for p in "${T_PIDS[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null
	done
	for p in "${T_PIDS[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null
	done
	if [ -n "${FAY_TEST_KEEP:-}" ]; then
		echo "# kept $T_TMP (FAY_TEST_KEEP)" >&2
	else
		rm -rf "$T_TMP"
	fi
}
trap t_cleanup EXIT

# tap_relay TAPFILE: another program's TAP lines as ours (renumbered);
# everything else in it passes through
tap_relay() {
	local l
	while IFS= read -r l; do
		case "$l" in
		"ok "*) pass "${l#ok * - }" ;;
		"not ok "*) fail "${l#not ok * - }" ;;
		*) echo "$l" ;;
		esac
	done <"$1"
}

done_testing() {
	echo "1..$T_N"
	[ $T_FAILED -eq 0 ]
}
