// SPDX-License-Identifier: MIT
/* Numbers from /proc/PID/status (uids, gids, capabilities, tracer) and
 * /proc/PID/stat (start time). */
#include <dirent.h>
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

int proc_status_nums(pid_t pid, const char *key, unsigned long long *v, int n)
{
	int base = strncmp(key, "Cap", 3) ? 10 : 16;
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

/* The line of /proc/PID/WHAT (a stat file) into line, and where its
 * fields after "pid (comm)" start (comm may hold spaces and ')': after the
 * last ')').  *rest NULL and -errno / -EPROTO when it cannot be read. */
static int stat_line(pid_t pid, const char *what, char *line, size_t len, char **rest)
{
	char fn[320], *p;
	FILE *f;

	*rest = NULL;
	f = proc_open(fn, sizeof(fn), pid, what);
	if (!f)
		return -errno;
	p = fgets(line, (int)len, f);
	fclose(f);
	p = p ? strrchr(line, ')') : NULL;
	if (!p)
		return -EPROTO;
	*rest = p + 1;
	return 0;
}

/* The state letter of /proc/PID/WHAT (a stat file: field 3) into *st.
 * 0, or -errno / -EPROTO. */
static int stat_state(pid_t pid, const char *what, char *st)
{
	char line[1024], *p;
	int err = stat_line(pid, what, line, sizeof(line), &p);

	if (err)
		return err;
	if (p[0] != ' ' || !p[1])
		return -EPROTO;
	*st = p[1];
	return 0;
}

/* Fields first .. first+n-1 of /proc/PID/WHAT (a stat file) (1-based, as proc(5)
 * numbers them; first >= 3) into v.  0, or -errno / -EPROTO. */
static int stat_fields_of(pid_t pid, const char *what, int first, unsigned long long *v, int n)
{
	char line[1024], *p, *end;
	int field = 3;   /* the first after "pid (comm)" */
	int err = stat_line(pid, what, line, sizeof(line), &p);

	if (err)
		return err;
	for (; *p && field < first; field++) {
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

static int stat_fields(pid_t pid, int first, unsigned long long *v, int n)
{
	return stat_fields_of(pid, "stat", first, v, n);
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

/* The SIGKILL bit of the "SigPnd:" and "ShdPnd:" lines (hex) of
 * /proc/PID/WHAT (a status file). */
static bool kill_pending(pid_t pid, const char *what)
{
	char fn[320], line[512];
	bool k = false;
	FILE *f = proc_open(fn, sizeof(fn), pid, what);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
			k |= (strtoull(line + 7, NULL, 16) & SIGKILL_BIT) != 0;
	if (f)
		fclose(f);
	return k;
}

/* Whether thread tid of pid is gone or on its way out: 1, 0, -errno. */
static int task_exiting(pid_t pid, const char *tid)
{
	unsigned long long flags;
	char what[288], st = 0;
	int ret;

	snprintf(what, sizeof(what), "task/%s/stat", tid);
	ret = stat_state(pid, what, &st);
	if (!ret && (st == 'Z' || st == 'X' || st == 'x'))
		return 1;
	ret = ret ? ret : stat_fields_of(pid, what, 9, &flags, 1);
	if (ret == -ENOENT || ret == -ESRCH)
		return 1;
	if (ret)
		return ret;
	if (flags & PF_EXITING_FLAG)
		return 1;
	snprintf(what, sizeof(what), "task/%s/status", tid);
	return kill_pending(pid, what);
}

int proc_exiting(pid_t pid)
{
	char fn[64];
	struct dirent *d;
	DIR *dir;
	int ret = 1;

	snprintf(fn, sizeof(fn), "/proc/%d/task", (int)pid);
	dir = opendir(fn);
	if (!dir)
		return errno == ENOENT || errno == ESRCH ? 1 : -errno;
	/* on its way out when every thread is (a main thread that called
	 * pthread_exit() is a zombie while the others run on) */
	while (ret == 1 && (d = readdir(dir)))
		if (d->d_name[0] != '.')
			ret = task_exiting(pid, d->d_name);
	closedir(dir);
	return ret;
}
