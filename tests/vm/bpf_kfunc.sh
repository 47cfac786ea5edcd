#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kernel.function in a QEMU guest with Debian's stock kernel: count K reads
# of /dev/zero through vfs_read with fentry/fexit and with kprobe/kretprobe
# (tests/unit/bpf/test_kfunc.c, FAY_EXPECT_KFUNC=1 so a refusal fails).
. "$(dirname "$0")/../lib/lib.sh"
need_root
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 is not installed (scripts/install-deps)"
BIN=$BUILD/san/tests/unit/bpf/test_kfunc
[ -x "$BIN" ] || BIN=$BUILD/tests/unit/bpf/test_kfunc
[ -x "$BIN" ] || skip_all "test_kfunc is not built (make SAN=1 tests)"

VM=$TOP/tests/vm/vmtest/run-in-vm.sh
out=$T_TMP/guest.log
cd "$T_TMP" || exit 1
FAY_EXPECT_KFUNC=1 ASAN_OPTIONS=detect_leaks=1 VMTEST_SHARES=$T_TMP \
	timeout 600 "$VM" "$BIN" >"$out" 2>&1
rc=$?
if [ $rc -eq 125 ] || [ $rc -eq 124 ]; then
	fail "the guest did not run the test (rc=$rc)" "$(tail -5 "$out")"
	done_testing
	exit
fi
# Renumber the guest's TAP lines into ours.
while IFS= read -r line; do
	case "$line" in
	"ok "*) pass "guest: ${line#ok * - }" ;;
	"not ok "*) fail "guest: ${line#not ok * - }" ;;
	"#"*) echo "$line" ;;
	esac
done <"$out"
grep -q '^ok .*fentry: K reads' "$out" && pass "fentry counted in the guest" || fail "fentry did not count in the guest"
grep -q '^ok .*kprobe: K reads' "$out" && pass "kprobe counted in the guest" || fail "kprobe did not count in the guest"
[ $rc -eq 0 ] && pass "guest test exited 0" || fail "guest test exited $rc" "$(grep -v '^ok' "$out" | tail -5)"
done_testing
