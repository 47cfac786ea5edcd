// SPDX-License-Identifier: MIT
/* Numbers from /proc/PID/status (uids, gids, capabilities, tracer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/procstat.h"

int proc_status_nums(pid_t pid, const char *key, unsigned long long *v, int n)
{
	int base = strncmp(key, "Cap", 3) ? 10 : 16;
	char fn[64], line[512];
	size_t kl = strlen(key);
	FILE *f;
	int got = 0;

	if (pid)
		snprintf(fn, sizeof(fn), "/proc/%d/status", (int)pid);
	else
		snprintf(fn, sizeof(fn), "/proc/self/status");
	f = fopen(fn, "re");
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
