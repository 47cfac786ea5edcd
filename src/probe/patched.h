/* SPDX-License-Identifier: MIT */
#ifndef FAY_PROBE_PATCHED_H
#define FAY_PROBE_PATCHED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Whether some live process with fay's inline runtime loaded has
 * rewritten the code at one of the file offsets offs[0..noffs) of path
 * (a jump or the write's hold there, not the file's bytes; another
 * uprobe's int3 does not count).  An every-process uprobe there would be
 * written over that code and later put the file's byte back into it
 * (patched.c says how that changed getppid()'s answers).  Returns 1 with
 * *pid the process and *which the offset's index, 0 when none (or path
 * unreadable), -ENOMEM.  Reads /proc/PID/maps of every process and
 * /proc/PID/mem of those with the runtime: for attach time, not a loop.
 */
int patched_in_process(const char *path, const uint64_t *offs, size_t noffs, pid_t *pid,
		       size_t *which);

#endif
