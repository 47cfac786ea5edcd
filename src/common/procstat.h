/* SPDX-License-Identifier: MIT */
#ifndef FAY_COMMON_PROCSTAT_H
#define FAY_COMMON_PROCSTAT_H

#include <sys/types.h>

/*
 * The numbers after "KEY:" in /proc/PID/status (pid 0: this process), up
 * to n of them, into v; the Cap* lines are read as hex, the rest as
 * decimal.  Returns how many were read (0 when the line is absent or has
 * none), or -errno when the file cannot be opened (-ENOENT: no such
 * process).
 */
int proc_status_nums(pid_t pid, const char *key, unsigned long long *v, int n);
/*
 * The start time of process pid (0: this process), in clock ticks after
 * boot (field 22 of /proc/PID/stat), into *ticks: with the pid it names a
 * process, whose pid a later one may reuse.  0, or -errno (-ENOENT: no
 * such process, -EPROTO: a line it cannot read).
 */
int proc_start_ticks(pid_t pid, unsigned long long *ticks);
/*
 * The CPU time process pid (0: this process) has used, user and system
 * (fields 14 and 15 of /proc/PID/stat), in clock ticks (sysconf
 * _SC_CLK_TCK a second) into *ticks.  0, or -errno (-ENOENT: no such
 * process, -EPROTO: a line it cannot read).
 */
int proc_cpu_ticks(pid_t pid, unsigned long long *ticks);
/*
 * Whether process pid is gone or on its way out: 1 when /proc/PID is
 * gone or every thread of it is a zombie, dead, in do_exit() (PF_EXITING:
 * its memory and files are going) or has a SIGKILL pending; 0 when a
 * thread of it runs on (a main thread that called pthread_exit() is a
 * zombie: the process is not); -errno (-EPROTO: a line it cannot read).
 * A process killed with SIGKILL answers 1 from the kill on, before the
 * kernel closes its files.
 */
int proc_exiting(pid_t pid);

#endif
