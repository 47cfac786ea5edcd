#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Kernel function wildcards through kprobe.multi (issue #27 item 1), in a
# QEMU guest booting bookworm-backports' kernel (6.12, CONFIG_FPROBE;
# Debian 12's 6.1 has none: query_kfunc.sh covers it), run by
# tests/vm/query_kmulti.guest: kernel.function("vfs_*") attaches one
# kprobe_multi link (fay's fdinfo says so), its counts per function equal
# bpftrace's kprobe:vfs_* @[func] in the same guest; kernel.function("*")
# attaches every traceable function, counts (vfs_read's hits among
# them), detaches; attach and detach times and the CPU added per hit are
# printed as "# figure" lines (bench/RESULTS.md has them).  Skips only
# when the backports kernel cannot be had (setup.sh --backports fails:
# no network, no bookworm-backports), saying why.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib.bash"
vm_need_query_work
BST=${VMTEST_BPO_STATE:-/var/tmp/fay-vmtest-bpo}
if ! ls "$BST"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
	VMTEST_STATE=$BST "$TOP/tests/vm/vmtest/setup.sh" --backports >"$T_TMP/setup.log" 2>&1 ||
		skip_all "bookworm-backports' kernel is unavailable: tests/vm/vmtest/setup.sh --backports failed: $(tail -1 "$T_TMP/setup.log")"
fi

out=$T_TMP/guest.log
if ! vm_tap "$out" 1500 VMTEST_BACKPORTS=1 VMTEST_STATE="$BST" VMTEST_TIMEOUT=1400 \
	FAY="$FAY" W="$W" bash "$TOP/tests/vm/query_kmulti.guest"; then
	done_testing
	exit
fi
rc=$VM_RC
want=7
command -v bpftrace >/dev/null && want=8
ok "the guest ran every case ($want)" [ "$(grep -c '^ok \|^not ok ' "$out")" -eq $want ]
ok "guest script exited 0" [ $rc -eq 0 ]
grep '^# figure' "$out"
done_testing
