#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The user stack walked in the BPF program by the process's unwind table
# (issue #27; src/engine/codegen_ustack.c) on the QEMU guest's kernel
# (Debian 12's 6.1): the verifier accepts the program there, and
# stack_work built -fomit-frame-pointer under a uprobe on -c gives
# main;A;B;C 600 and main;A;D;C 200 exactly, as on the host; profile(199)
# on it: 9 samples in 10 in C or D reach main, and the program reads a sample's
# user registers in the kernel with bpf_task_pt_regs() there: python3
# read()ing /dev/zero has 6 samples in 10 five frames deep or more
# (tests/vm/query_ustack.guest runs in the guest).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib.bash"
vm_need_query_work
NOFP=$BUILD/tests/bin/stack_work_nofp
[ -x "$NOFP" ] || skip_all "stack_work is not built (make)"
vm_guest query_ustack.guest 5 FAY="$FAY" NOFP="$NOFP"
