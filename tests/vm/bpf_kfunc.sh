#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kernel.function in a QEMU guest with Debian's stock kernel: count K reads
# of /dev/zero through vfs_read with fentry/fexit and with kprobe/kretprobe
# (tests/unit/bpf/test_kfunc.c, FAY_EXPECT_KFUNC=1 so a refusal fails).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/lib.bash"
BIN=$BUILD/san/tests/unit/bpf/test_kfunc
[ -x "$BIN" ] || BIN=$BUILD/tests/unit/bpf/test_kfunc
[ -x "$BIN" ] || skip_all "test_kfunc is not built (make SAN=1 tests)"

out=$T_TMP/guest.log
if ! vm_tap "$out" 600 FAY_EXPECT_KFUNC=1 ASAN_OPTIONS=detect_leaks=1 "$BIN"; then
	done_testing
	exit
fi
rc=$VM_RC
grep -q '^ok .*fentry: K reads' "$out" && pass "fentry counted in the guest" || fail "fentry did not count in the guest"
grep -q '^ok .*kprobe: K reads' "$out" && pass "kprobe counted in the guest" || fail "kprobe did not count in the guest"
[ $rc -eq 0 ] && pass "guest test exited 0" || fail "guest test exited $rc" "$(grep -v '^ok' "$out" | tail -5)"
done_testing
