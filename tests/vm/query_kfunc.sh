#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query on kernel.function("vfs_read") in a QEMU guest with Debian's
# stock kernel (this host allows neither fentry nor kprobes): K reads of
# /dev/zero give an exact count through fentry/fexit and through
# kprobe/kretprobe (tests/vm/query_kfunc.guest runs in the guest).
. "$(dirname "$0")/../lib/lib.sh"
need_root
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 is not installed (scripts/install-deps)"
W=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || skip_all "fay is not built"
[ -x "$W" ] || skip_all "query_work is not built (make)"

VM=$TOP/tests/vm/vmtest/run-in-vm.sh
out=$T_TMP/guest.log
cd "$T_TMP" || exit 1
FAY=$FAY W=$W VMTEST_SHARES=$T_TMP timeout 900 "$VM" bash "$TOP/tests/vm/query_kfunc.guest" >"$out" 2>&1
rc=$?
if [ $rc -eq 125 ] || [ $rc -eq 124 ]; then
	fail "the guest did not run the test (rc=$rc)" "$(tail -5 "$out")"
	done_testing
	exit
fi
while IFS= read -r line; do
	case "$line" in
	"ok "*) pass "guest: ${line#ok * - }" ;;
	"not ok "*) fail "guest: ${line#not ok * - }" ;;
	"#"*) echo "$line" ;;
	esac
done <"$out"
ok "the guest ran every case (5)" [ "$(grep -c '^ok \|^not ok ' "$out")" -eq 5 ]
ok "guest script exited 0" [ $rc -eq 0 ]
done_testing
