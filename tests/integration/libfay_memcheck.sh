#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libfay reads nothing past a traceparent header it is given: under
# Valgrind's memcheck, agent_tools/tp_heap.c hands fay_span_remote()
# headers in heap buffers of exactly their size (the NUL the last byte),
# at every offset 0-15 and length 0-72, and records sampled spans; memcheck
# must report no error, and each header must be accepted or refused as its
# length calls for.  The reader's fast length test loads 16 bytes at a
# time (issue 21): an unaligned load past the buffer's end is an invalid
# read to memcheck (it was, in the first version of that test).
. "$(dirname "$0")/../lib/lib.sh"
command -v valgrind >/dev/null || skip_all "needs valgrind"
TOOL=$BUILD/tests/bin/tp_heap
[ -x "$TOOL" ] || skip_all "tp_heap not built (make O=... agent-tests)"
mkdir -p "$T_TMP/shm"

FAY_SHM_DIR=$T_TMP/shm FAY_SAMPLE=1 valgrind --error-exitcode=9 \
	--log-file="$T_TMP/memcheck.log" "$TOOL" >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
ok "tp_heap runs to the end under memcheck (exit $rc: 9 = memcheck errors)" test $rc -eq 0
ok "memcheck: 0 errors" grep -q "ERROR SUMMARY: 0 errors" "$T_TMP/memcheck.log"
# 16 offsets x (version 00: length 55; version 01: lengths 55-72)
ok "every header answered as its length says: $(cat "$T_TMP/out")" \
	grep -qx "accepted 304 refused 2032 wrong 0" "$T_TMP/out"
[ $T_FAILED -eq 0 ] || { grep -m5 -A6 "Invalid read" "$T_TMP/memcheck.log" | sed 's/^/# /'; cat "$T_TMP/err" | sed 's/^/# /'; }
done_testing
