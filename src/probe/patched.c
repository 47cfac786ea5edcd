// SPDX-License-Identifier: MIT
/*
 * Whether a live process has rewritten a function a uprobe is about to go
 * on in every process.
 *
 * A uprobe without a pid is put into every process that maps the file:
 * the kernel writes an int3 over the function's first byte in each, and
 * when the uprobe goes, writes the file's byte back.  In a process where
 * fay's inline runtime (another fay query) has put a jump there, the int3
 * lands on the jump's first byte and the file's byte then replaces it:
 * `mov $0x6e,%eax` followed by the jump's displacement, and glibc's
 * getppid() returned another number in 244 of 500 calls (python3, 29 Nov
 * 2026).  So an every-process uprobe is refused while such a process
 * lives.  Only processes with fay's runtime mapped are read: their
 * /proc/PID/maps names libfay-probe.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe/inject.h"
#include "probe/patched.h"

#define CMP_LEN 5	/* an inline jump's bytes */

/* Whether pid has fay's runtime mapped (its maps name libfay-probe). */
static bool has_runtime(pid_t pid)
{
	char path[64], line[4400];
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!yes && fgets(line, sizeof(line), f))
		yes = strstr(line, "libfay-probe") != NULL;
	fclose(f);
	return yes;
}

/* Whether the CMP_LEN bytes at addr in a process (mem: its /proc/PID/mem)
 * differ from want, other than by another uprobe's int3 (which a second
 * uprobe shares and puts back right); want all int3: the file's bytes
 * are not known, nothing is; addr 0: not mapped there. */
static bool rewritten(int mem, uint64_t addr, const unsigned char *want)
{
	unsigned char got[CMP_LEN];

	return want[0] != 0xcc && addr && pread(mem, got, CMP_LEN, (off_t)addr) == CMP_LEN &&
	       memcmp(got, want, CMP_LEN) && got[0] != 0xcc;
}

int patched_in_process(const char *path, const uint64_t *offs, size_t noffs, pid_t *pid,
		       size_t *which)
{
	unsigned char (*want)[CMP_LEN];
	uint64_t *addrs;
	struct dirent *de;
	DIR *d;
	int fd, found = 0;

	if (!noffs)
		return 0;
	want = calloc(noffs, sizeof(*want));
	addrs = calloc(noffs, sizeof(*addrs));
	if (!want || !addrs) {
		free(want);
		free(addrs);
		return -ENOMEM;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	for (size_t i = 0; fd >= 0 && i < noffs; i++)
		if (pread(fd, want[i], CMP_LEN, (off_t)offs[i]) != CMP_LEN)
			memset(want[i], 0xcc, CMP_LEN);	/* unknown: rewritten() skips it */
	if (fd >= 0)
		close(fd);
	d = fd >= 0 ? opendir("/proc") : NULL;
	while (d && !found && (de = readdir(d))) {
		pid_t p = (pid_t)atoi(de->d_name);
		char mem[64];
		int m;

		if (p <= 0 || p == getpid() || !has_runtime(p) ||
		    proc_map_addrs(p, path, offs, noffs, addrs) <= 0)
			continue;	/* (one read of its maps for every offset) */
		snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)p);
		m = open(mem, O_RDONLY | O_CLOEXEC);
		if (m < 0)
			continue;	/* gone, or not ours to read: nothing known */
		for (size_t i = 0; i < noffs && !found; i++)
			if (rewritten(m, addrs[i], want[i])) {
				*pid = p;
				*which = i;
				found = 1;
			}
		close(m);
	}
	if (d)
		closedir(d);
	free(want);
	free(addrs);
	return found;
}
