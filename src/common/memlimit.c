// SPDX-License-Identifier: MIT
/* How much memory this process may use: see memlimit.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/memlimit.h"

static uint64_t mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

/*
 * Where the hierarchy is mounted (v2: fstype cgroup2; v1: fstype cgroup
 * with the memory controller) and the cgroup path its root is: 0 or -1.
 */
static int cg_mount(int v2, char *mnt, size_t mlen, char *root, size_t rlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024];
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		char r[512], m[512], fstype[64], super[512];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %511s %511s", r, m) != 2 ||
		    sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") :
			 strcmp(fstype, "cgroup") || !strstr(super, "memory"))
			continue;
		snprintf(mnt, mlen, "%s", m);
		snprintf(root, rlen, "%s", r);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* Is ctl in list (comma-separated)? */
static int has_ctl(const char *list, const char *ctl)
{
	size_t n = strlen(ctl);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, ctl, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

/* This process's cgroup in the hierarchy (lines "ID:CONTROLLERS:PATH";
 * v2: "0::PATH", v1: the one whose controllers include memory): 0 or -1. */
static int cg_path(int v2, char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *p = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!p)
			continue;
		*ctl++ = '\0';
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		if (v2 ? strcmp(line, "0") || *ctl : !has_ctl(ctl, "memory"))
			continue;
		snprintf(path, len, "%s", p);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* The cgroup directory: mnt + path less the mount's root. */
static void cg_dir(const char *mnt, const char *root, const char *path, char *dir, size_t len)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") && !strncmp(path, root, n))
		path += n;
	snprintf(dir, len, "%s%s", mnt, strcmp(path, "/") ? path : "");
}

/* A limit file's value (v2 memory.max: "max" is none): 0 or -1. */
static int read_limit(const char *file, const char *key, uint64_t *v)
{
	FILE *f = fopen(file, "re");
	char line[256];
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		unsigned long long x;
		char k[64];

		if (key) {
			if (sscanf(line, "%63s %llu", k, &x) == 2 && !strcmp(k, key)) {
				*v = x;
				ret = 0;
			}
		} else if (!strncmp(line, "max", 3)) {
			*v = UINT64_MAX;
			ret = 0;
		} else if (sscanf(line, "%llu", &x) == 1) {
			*v = x;
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

/* Contract in memlimit.h. */
uint64_t mem_limit(char *how, size_t howlen)
{
	uint64_t best = mem_total(), v;
	char mnt[512], root[512], path[1024], dir[2048], file[2100];

	snprintf(how, howlen, "MemTotal");
	/* v2: memory.max of the cgroup and each ancestor */
	if (!cg_mount(1, mnt, sizeof(mnt), root, sizeof(root)) &&
	    !cg_path(1, path, sizeof(path))) {
		cg_dir(mnt, root, path, dir, sizeof(dir));
		for (;;) {
			snprintf(file, sizeof(file), "%s/memory.max", dir);
			if (!read_limit(file, NULL, &v) && v && v < best) {
				best = v;
				snprintf(how, howlen, "cgroup v2 memory.max of %s", dir);
			}
			if (strlen(dir) <= strlen(mnt))
				break;
			*strrchr(dir, '/') = '\0';
		}
	}
	/* v1: the memory controller's limit, ancestors included */
	if (!cg_mount(0, mnt, sizeof(mnt), root, sizeof(root)) &&
	    !cg_path(0, path, sizeof(path))) {
		cg_dir(mnt, root, path, dir, sizeof(dir));
		snprintf(file, sizeof(file), "%s/memory.stat", dir);
		if (!read_limit(file, "hierarchical_memory_limit", &v) && v && v < best) {
			best = v;
			snprintf(how, howlen, "cgroup v1 memory limit of %s", dir);
		}
	}
	return best;
}
