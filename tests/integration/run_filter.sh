#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/run with a filter: a pattern that matches no test fails (it used
# to pass with "0 passed, 0 failed"), alone or beside one that matches; a
# pattern that matches still runs its test.  This file is its own matching
# test: run by the inner tests/run with RUN_FILTER_INNER=1, it only says ok
# (the inner runs keep their logs in a build dir of their own, $T_TMP/b).
set -u
if [ -n "${RUN_FILTER_INNER:-}" ]; then
	echo "1..1"
	echo "ok 1 - inner run"
	exit 0
fi
. "$(dirname "$0")/../lib/lib.sh"
cd "$TOP"

typo=no_such_test_$$_xyz
FAY_BUILD=$T_TMP/b RUN_FILTER_INNER=1 timeout 60 tests/run "$typo" >"$T_TMP/o1" 2>"$T_TMP/e1"
rc=$?
[ $rc -ne 0 ] && grep -q "no test matches '$typo'" "$T_TMP/e1" &&
	pass "tests/run $typo: fails (rc=$rc) naming the pattern" ||
	fail "tests/run $typo (rc=$rc)" "$(cat "$T_TMP/o1" "$T_TMP/e1")"
tail -n 1 "$T_TMP/o1" | grep -q '^0 passed, 1 failed$' &&
	pass "its last line counts a failure" || fail "last line" "$(cat "$T_TMP/o1")"

FAY_BUILD=$T_TMP/b RUN_FILTER_INNER=1 timeout 60 tests/run run_filter.sh "$typo" >"$T_TMP/o2" 2>"$T_TMP/e2"
rc=$?
[ $rc -ne 0 ] && grep -q "no test matches '$typo'" "$T_TMP/e2" && ! grep -q 'inner run\|passed, 0 failed' "$T_TMP/o2" &&
	pass "one pattern matching, one not: fails before running anything" ||
	fail "tests/run run_filter.sh $typo (rc=$rc)" "$(cat "$T_TMP/o2" "$T_TMP/e2")"

FAY_BUILD=$T_TMP/b RUN_FILTER_INNER=1 timeout 60 tests/run integration/run_filter.sh >"$T_TMP/o3" 2>"$T_TMP/e3"
rc=$?
[ $rc -eq 0 ] && tail -n 1 "$T_TMP/o3" | grep -q '^1 passed, 0 failed$' &&
	pass "a pattern that matches runs its test (1 passed)" ||
	fail "tests/run integration/run_filter.sh (rc=$rc)" "$(cat "$T_TMP/o3" "$T_TMP/e3")"
done_testing
