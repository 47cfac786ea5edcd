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
# A failing cmd's standard error (its last 2,000 bytes: a python
# assertion's traceback) follows the "not ok" line as TAP comments, where
# a summary of the run shows it; a passing one's goes to stderr as ever.
ok() {
	local what=$1 err; shift
	T_N=$((T_N + 1))
	err=$T_TMP/.ok.$T_N.stderr	# one a check: a daemon it started keeps its own
	if "$@" 2>"$err"; then
		cat "$err" >&2
		rm -f "$err"
		echo "ok $T_N - $what"
		return 0
	fi
	T_FAILED=$((T_FAILED + 1))
	echo "not ok $T_N - $what"
	tail -c 2000 "$err" | sed 's/^/#   /'
	rm -f "$err"
	return 1
}

# cq_rows FILE: the result rows of a `fay query --cluster --json` output,
# without the line of completeness that follows each window's rows (or the
# result's): {...,"hosts":{"asked":N,...},...}
cq_rows() { grep -v '"hosts":{"asked":' "$1"; }

pass() { T_N=$((T_N + 1)); echo "ok $T_N - $1"; }
# fail WHAT [DETAIL...] and diag TEXT: every line of a detail or text is
# its own "# " line, so a multi-line one (a command's output) reaches the
# excerpt tests/run prints of a failure, which keeps only TAP's lines.
fail() { T_N=$((T_N + 1)); T_FAILED=$((T_FAILED + 1)); echo "not ok $T_N - $1"; shift; local l; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/#   /'; done; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }

need_root() { [ "$(id -u)" -eq 0 ] || skip_all "needs root"; }

# bg cmd...: start in the background, remember the pid for cleanup.
bg() { "$@" & T_PIDS+=($!); }

# A free TCP port on 127.0.0.1, never one this test was given before.
# The kernel picks bind(0)'s port at random among the free odd ones and
# the port is released before the caller binds it, so two calls in a row
# could get the same one (7 pairs in 100,000 here: 1 in 14,000), e.g.
# coll_start's WP and HP, and then the collector cannot start (a CI run
# starts well over a hundred collectors).  The ports handed
# out are noted in $T_TMP/.free_ports (a file: callers run $(free_port)
# in a subshell) and a repeat is drawn again.
free_port() {
	python3 - "$T_TMP/.free_ports" <<'PY'
import socket, sys
try:
    given = set(open(sys.argv[1]).read().split())
except OSError:
    given = set()
while True:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
    s.close()
    if port not in given:
        break
with open(sys.argv[1], "a") as f:
    f.write(port + "\n")
print(port)
PY
}

# hosts_attached ERR: how many hosts fay query --cluster's stderr ERR says
# attached: distinct "fay: HOST: attached" lines, not lines (each time one
# more host answers, the query prints every attached host again, and
# after 2 s without all answers the lines add up before all attached)
hosts_attached() { grep -o '^fay: [^:]*: attached' "$1" | sort -u | wc -l; }

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
