#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A plain `make` (no `make tests`) gives everything a program linked with
# -lfay needs: libfay.so and its soname link libfay.so.0 (issue #11).
. "$(dirname "$0")/../lib/lib.sh"
command -v gcc >/dev/null || skip_all "needs gcc"
out=$T_TMP/build
if (cd "$TOP" && make -s O="$out" -j2 >"$T_TMP/make.log" 2>&1); then
	pass "make O=DIR builds"
else
	fail "make O=DIR" "$(tail -5 "$T_TMP/make.log")"
fi
ok "libfay.so.0 is there after a plain make" test -e "$out/libfay.so.0"
cat >"$T_TMP/prog.c" <<'EOF'
#include <fay/trace.h>
int main(void)
{
	struct fay_span *s = fay_span_root("hello");

	fay_span_end(s);
	return 0;
}
EOF
if gcc -I"$TOP/include" "$T_TMP/prog.c" -L"$out" -lfay -o "$T_TMP/prog" 2>"$T_TMP/cc.log"; then
	FAY_DISABLE=1 LD_LIBRARY_PATH=$out "$T_TMP/prog"
	RC=$?
	[ $RC -eq 0 ] && pass "a program linked with -lfay starts (exit 0, not 127)" ||
		fail "the linked program exited $RC"
else
	fail "linking with -lfay" "$(cat "$T_TMP/cc.log")"
fi
done_testing
