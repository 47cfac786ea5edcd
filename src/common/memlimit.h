/* SPDX-License-Identifier: MIT */
/*
 * How much memory this process may use (#20): the smallest of the
 * machine's memory (MemTotal) and the limits of the memory cgroups it is
 * in.  cgroup v2: memory.max of its cgroup and of every ancestor (the
 * unified hierarchy, wherever it is mounted: /sys/fs/cgroup or
 * /sys/fs/cgroup/unified); cgroup v1: the memory controller's
 * hierarchical_memory_limit (memory.stat) of its cgroup, which already
 * takes the ancestors into account.  A limit of "max" or one at or above
 * MemTotal does not count.
 */
#ifndef FAY_COMMON_MEMLIMIT_H
#define FAY_COMMON_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

/*
 * The bytes this process may use; what decided it in how (e.g.
 * "cgroup v1 memory limit of /sys/fs/cgroup/memory/x" or "MemTotal").
 * 0 when nothing could be read (no /proc).
 */
uint64_t mem_limit(char *how, size_t howlen);

#endif
