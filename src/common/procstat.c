// SPDX-License-Identifier: MIT
/* Numbers from /proc/PID/status (uids, gids, capabilities, tracer) and
 * /proc/PID/stat (start time). */
#include <errno.h>
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

int proc_start_ticks(pid_t pid, unsigned long long *ticks)
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
	for (p++; *p && field < 22; field++) {
		p += strspn(p, " ");
		p += strcspn(p, " ");
	}
	*ticks = strtoull(p, &end, 10);
	return field == 22 && end != p ? 0 : -EPROTO;
}
