#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query on kernel.function("vfs_read") in a QEMU guest with Debian's
# stock kernel (this host allows neither fentry nor kprobes): K reads of
# /dev/zero give an exact count through fentry/fexit and through
# kprobe/kretprobe, and str() of a __user argument (getname's
# filename) read as kernel memory, else user memory
# (tests/vm/query_kfunc.guest runs in the guest), and s.kstack of
# vfs_read (the system call path to it, named by kallsyms); wildcards
# (issue #27): kernel.function("vfs_*") by s.name, with ret, the
# refusals of "*" (no kprobe.multi here), of fay's own functions, of an
# empty match, and the time "*_read*" takes to attach and detach;
# s.container and s.cgroup of a kernel function (issue #25), grouped and
# filtered in the probe.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib.bash"
vm_need_query_work

vm_guest query_kfunc.guest 18 FAY="$FAY" W="$W"
