// SPDX-License-Identifier: MIT
/* Numbers from /proc/PID/status (uids, gids, capabilities, tracer) and
 * /proc/PID/stat (start time). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/procstat.h"

/* Open /proc/PID/what (pid 0: /proc/self) for reading, its name in fn. */
static FILE *proc_open(char *fn, size_t len, pid_t pid, const char *what)
{
	if (pid)
		snprintf(fn, len, "/proc/%d/%s", (int)pid, what);
	else
		snprintf(fn, len, "/proc/self/%s", what);
	return fopen(fn, "re");
}

/* The status lines whose numbers are hex masks: Cap*, and the signal
 * sets (SigPnd, ShdPnd, SigBlk, SigIgn, SigCgt; SigQ is "n/m"). */
static bool hex_key(const char *key)
{
	return !strncmp(key, "Cap", 3) || !strcmp(key, "ShdPnd") ||
	       (!strncmp(key, "Sig", 3) && strcmp(key, "SigQ"));
}

int proc_status_nums(pid_t pid, const char *key, unsigned long long *v, int n)
{
	int base = hex_key(key) ? 16 : 10;
	char fn[64], line[512];
	size_t kl = strlen(key);
	FILE *f;
	int got = 0;

	f = proc_open(fn, sizeof(fn), pid, "status");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + kl;

		if (strncmp(line, key, kl) || *p != ':')
			continue;
		p++;
		for (; got < n; got++) {
			char *end;

			v[got] = strtoull(p, &end, base);
			if (end == p)
				break;
			p = end;
		}
		break;
	}
	fclose(f);
	return got;
}

/* The state letter of /proc/PID/stat (field 3) into *st.  0, or -errno /
 * -EPROTO. */
static int stat_state(pid_t pid, char *st)
{
	char fn[64], line[1024], *p;
	FILE *f;

	f = proc_open(fn, sizeof(fn), pid, "stat");
	if (!f)
		return -errno;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	p = p ? strrchr(line, ')') : NULL;
	if (!p || p[1] != ' ' || !p[2])
		return -EPROTO;
	*st = p[2];
	return 0;
}

/* Fields first .. first+n-1 of /proc/PID/stat (1-based, as proc(5)
 * numbers them; first >= 3) into v.  0, or -errno / -EPROTO. */
static int stat_fields(pid_t pid, int first, unsigned long long *v, int n)
{
	char fn[64], line[1024], *p, *end;
	FILE *f;
	int field = 3;   /* the first after "pid (comm)" */

	f = proc_open(fn, sizeof(fn), pid, "stat");
	if (!f)
		return -errno;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	/* comm may hold spaces and ')': the fields start after the last ')' */
	p = p ? strrchr(line, ')') : NULL;
	if (!p)
		return -EPROTO;
	for (p++; *p && field < first; field++) {
		p += strspn(p, " ");
		p += strcspn(p, " ");
	}
	for (int i = 0; i < n; i++) {
		v[i] = strtoull(p, &end, 10);
		if (field != first || end == p)
			return -EPROTO;
		p = end;
	}
	return 0;
}

int proc_start_ticks(pid_t pid, unsigned long long *ticks)
{
	return stat_fields(pid, 22, ticks, 1);
}

int proc_cpu_ticks(pid_t pid, unsigned long long *ticks)
{
	unsigned long long v[2];
	int ret = stat_fields(pid, 14, v, 2);

	if (!ret)
		*ticks = v[0] + v[1];
	return ret;
}

/* PF_EXITING of the kernel's task flags (include/linux/sched.h): set as
 * do_exit() starts, before the task's memory and files go. */
#define PF_EXITING_FLAG	0x4ull
#define SIGKILL_BIT	(1ull << 8)

int proc_exiting(pid_t pid)
{
	unsigned long long flags, pend;
	char st;
	int ret = stat_state(pid, &st);

	if (ret == -ENOENT || ret == -ESRCH)
		return 1;
	if (ret)
		return ret;
	if (st == 'Z' || st == 'X' || st == 'x')
		return 1;
	ret = stat_fields(pid, 9, &flags, 1);
	if (ret == -ENOENT || ret == -ESRCH)
		return 1;
	if (ret)
		return ret;
	if (flags & PF_EXITING_FLAG)
		return 1;
	/* killed, not yet in do_exit() (the SIGKILL is pending on every
	 * thread and in the shared set) */
	if (proc_status_nums(pid, "ShdPnd", &pend, 1) == 1 && (pend & SIGKILL_BIT))
		return 1;
	if (proc_status_nums(pid, "SigPnd", &pend, 1) == 1 && (pend & SIGKILL_BIT))
		return 1;
	return 0;
}
