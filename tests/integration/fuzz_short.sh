#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A short run of every libFuzzer target (tests/fuzz/, built by make check
# through make FUZZ=1 fuzz-bins): each replays its seed corpus
# (tests/fuzz/corpus/NAME/) and what earlier runs found, then fuzzes for
# FUZZ_SECONDS (default 5) seconds under ASan+UBSan.  A crash, leak, hang
# or failed property is a failure, with the input kept (scripts/fuzz)
# and printed: its cause, where, and the input in base64.
# make fuzz FUZZ_SECONDS=600 is the long run.
. "$(dirname "$0")/../lib/lib.sh"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang >/dev/null || skip_all "needs clang (scripts/install-deps)"
n=0
for f in "$TOP"/tests/fuzz/fuzz_*.c; do
	name=${f##*/fuzz_}
	name=${name%.c}
	n=$((n + 1))
	if [ ! -x "$BUILD/fuzz/fuzz-bin/fuzz_$name" ]; then
		fail "fuzz target $name is built" "$BUILD/fuzz/fuzz-bin/fuzz_$name is missing: make FUZZ=1 fuzz-bins (make check builds it)"
		continue
	fi
	ok "seed corpus of $name is in the repository" test -n "$(ls "$TOP/tests/fuzz/corpus/$name" 2>/dev/null)"
	out=$(FAY_BUILD=$BUILD FUZZ_SECONDS=${FUZZ_SECONDS:-5} "$TOP/scripts/fuzz" "$name" 2>&1)
	rc=$?
	# A finding's cause and input (scripts/fuzz prints them) go into the
	# failure's "#" lines: a CI-only finding is reproduced from them.
	if [ $rc -eq 0 ]; then
		diag "$out"
		pass "fuzz $name: no finding"
	else
		fail "fuzz $name" "$out"
	fi
done
ok "there are fuzz targets" test $n -ge 6
done_testing
