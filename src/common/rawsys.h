// SPDX-License-Identifier: MIT
/*
 * A system call without libc, for code that runs where a libc call may
 * not be made: the patcher's window (patch/live.c) and the in-process
 * runtime's probes and handlers (rt/), where any libc function may be
 * the one being probed or patched.  x86-64 only.
 */
#ifndef FAY_COMMON_RAWSYS_H
#define FAY_COMMON_RAWSYS_H

/* System call nr with up to four arguments: its raw return (-errno on
 * failure, errno untouched). */
static inline long raw_syscall(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

#endif
