// SPDX-License-Identifier: MIT
/*
 * A process's own view of the machine (procroot.h).  A containerized
 * process maps its own copy of libc (/usr/lib/x86_64-linux-gnu/libc.so.6
 * in its mount namespace, another inode than the host's): a uprobe on the
 * host's file would never fire in it.  So a name is looked up in what the
 * process maps first (the very file it runs), then in its root.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/procstat.h"
#include "probe/elfsym.h"
#include "probe/procroot.h"

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

bool proc_other_root(pid_t pid)
{
	char ns[64], root[64];

	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	if (access(root, F_OK))
		return false;
	return !same_file(ns, "/proc/self/ns/mnt") || !same_file(root, "/");
}

/* Does the mapped file path answer to name? */
static bool map_matches(const char *name, const char *path)
{
	const char *base = strrchr(path, '/');

	if (strchr(name, '/'))
		return !strcmp(name, path);
	base = base ? base + 1 : path;
	if (!strcmp(name, base))
		return true;
	return !strncmp(name, "lib", 3) && elf_lib_matches(name, base);
}

static bool ino_is(const char *path, unsigned long long ino)
{
	struct stat st;

	return !stat(path, &st) && (unsigned long long)st.st_ino == ino;
}

int proc_mapped_path(pid_t pid, const char *line, char *path, size_t len)
{
	char range[64], file[4200];
	unsigned long long ino;
	unsigned int maj, mn;
	struct stat st;

	if (sscanf(line, "%63s %*s %*x %x:%x %llu %4199s", range, &maj, &mn, &ino, file) != 5 ||
	    file[0] != '/')
		return -ENOENT;
	snprintf(file, sizeof(file), "%s", strchr(line, '/'));
	file[strcspn(file, "\n")] = '\0';
	if (strstr(file, " (deleted)"))
		return -ENOENT;
	/* the path as fay sees it: the same device too (a container's
	 * /usr/lib/... may have the inode number of another file of the
	 * host's); through its root or map_files the inode is enough (an
	 * overlay's stat and maps differ in the device) */
	if (strlen(file) < len && !stat(file, &st) && st.st_ino == ino &&
	    st.st_dev == makedev(maj, mn)) {
		snprintf(path, len, "%s", file);
		return 0;
	}
	if ((size_t)snprintf(path, len, "/proc/%d/root%s", (int)pid, file) < len &&
	    ino_is(path, ino))
		return 0;
	snprintf(path, len, "/proc/%d/map_files/%s", (int)pid, range);
	return ino_is(path, ino) ? 0 : -ENOENT;
}

int proc_each_exec_map(pid_t pid,
		       int (*cb)(const char *line, unsigned long long lo, unsigned long long hi,
				 unsigned long long off, const char *file, void *arg),
		       void *arg)
{
	char fn[64], line[4400];
	FILE *mf;
	int rc = 0;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	mf = fopen(fn, "re");
	if (!mf)
		return -errno;
	while (!rc && fgets(line, sizeof(line), mf)) {
		char perms[8], *file = strchr(line, '/');
		unsigned long long lo, hi, off;

		line[strcspn(line, "\n")] = '\0';
		if (file && sscanf(line, "%llx-%llx %7s %llx", &lo, &hi, perms, &off) == 4 &&
		    perms[2] == 'x')
			rc = cb(line, lo, hi, off, file, arg);
	}
	fclose(mf);
	return rc;
}

/* maps_walk()'s state */
struct walk {
	pid_t pid;
	const char *name;
	const unsigned long long *at;
	int (*f)(const char *path, void *arg);
	void *arg;
};

static int walk_one(const char *line, unsigned long long lo, unsigned long long hi,
		    unsigned long long off, const char *file, void *arg)
{
	struct walk *w = arg;
	char path[4400];

	(void)off;
	if (w->at && (*w->at < lo || *w->at >= hi))
		return 0;
	if (map_matches(w->name, file) && !proc_mapped_path(w->pid, line, path, sizeof(path)))
		return w->f(path, w->arg);
	return 0;
}

/*
 * Each file pid maps executable that answers to name (with at: only the
 * mapping at address *at): f(a path fay opens for it, arg) until f
 * returns non-zero, which is returned; else 0 (also when the maps cannot
 * be read: gone, or a kernel thread).
 */
static int maps_walk(pid_t pid, const char *name, const unsigned long long *at,
		     int (*f)(const char *path, void *arg), void *arg)
{
	struct walk w = { pid, name, at, f, arg };
	int rc = proc_each_exec_map(pid, walk_one, &w);

	return rc < 0 ? 0 : rc;
}

struct path_out {
	char *path;
	size_t len;
};

/* maps_walk()'s f: the first path that fits */
static int path_copy(const char *path, void *arg)
{
	struct path_out *o = arg;

	return (size_t)snprintf(o->path, o->len, "%s", path) < o->len;
}

/* The first file pid maps executable that answers to name. */
static int maps_lookup(pid_t pid, const char *name, char *path, size_t len)
{
	struct path_out o = { path, len };

	return maps_walk(pid, name, NULL, path_copy, &o) == 1 ? 0 : -ENOENT;
}

int proc_mapped_at(pid_t pid, unsigned long long addr, const char *name, char *path,
		   size_t len)
{
	struct path_out o = { path, len };

	return maps_walk(pid, name, &addr, path_copy, &o) == 1 ? 0 : -ENOENT;
}

/* fn: /proc/PID/map_files/LO-HI of the mapping at addr, size bytes */
static void map_files_name(char *fn, size_t len, pid_t pid, unsigned long long addr,
			   unsigned long long size)
{
	unsigned long long page = (unsigned long long)sysconf(_SC_PAGESIZE);

	snprintf(fn, len, "/proc/%d/map_files/%llx-%llx", (int)pid, addr,
		 addr + (size + page - 1) / page * page);
}

int proc_mapping_stat(pid_t pid, unsigned long long addr, unsigned long long size,
		      struct stat *st)
{
	char fn[96];

	map_files_name(fn, sizeof(fn), pid, addr, size);
	return stat(fn, st) ? -errno : 0;
}

int proc_mapped_file(pid_t pid, unsigned long long addr, unsigned long long size,
		     const char *name, struct stat *st)
{
	char fn[96], target[4200], path[4400];
	ssize_t n;

	map_files_name(fn, sizeof(fn), pid, addr, size);
	n = readlink(fn, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		return map_matches(name, target) && !stat(fn, st) ? 0 : -ENOENT;
	}
	if (proc_mapped_at(pid, addr, name, path, sizeof(path)) || stat(path, st))
		return -ENOENT;
	return 0;
}

struct seen {
	dev_t dev;
	ino_t ino;
};

#define PROC_MAX_FILES 256	/* distinct files of one name */

struct each {
	struct seen *seen;
	size_t *nseen;
	int (*cb)(const char *, dev_t, ino_t, void *);
	void *arg;
};

/* maps_walk()'s f for proc_each_mapped(): a file none seen yet */
static int each_file(const char *path, void *arg)
{
	struct each *e = arg;
	struct stat st;

	if (stat(path, &st))
		return 0;
	for (size_t i = 0; i < *e->nseen; i++)
		if (e->seen[i].dev == st.st_dev && e->seen[i].ino == st.st_ino)
			return 0;
	if (*e->nseen == PROC_MAX_FILES)
		return 0;
	e->seen[(*e->nseen)++] = (struct seen){ st.st_dev, st.st_ino };
	return e->cb(path, st.st_dev, st.st_ino, e->arg);
}

/* One process's maps: each new file that answers to name. */
static int each_in(pid_t pid, const char *name, struct seen *seen, size_t *nseen,
		   int (*cb)(const char *, dev_t, ino_t, void *), void *arg)
{
	struct each e = { seen, nseen, cb, arg };

	return maps_walk(pid, name, NULL, each_file, &e);
}

int proc_each_mapped(const char *name,
		     int (*cb)(const char *path, dev_t dev, ino_t ino, void *arg),
		     void *arg)
{
	struct seen *seen = calloc(PROC_MAX_FILES, sizeof(*seen));
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t nseen = 0;
	int rc = 0;

	if (!seen || !d) {
		rc = seen ? -errno : -ENOMEM;
		free(seen);
		if (d)
			closedir(d);
		return rc;
	}
	while (!rc && (de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			rc = each_in((pid_t)atoi(de->d_name), name, seen, &nseen, cb, arg);
	closedir(d);
	free(seen);
	return rc;
}

int proc_resolve_path(pid_t pid, const char *name, char *path, size_t len)
{
	char root[64];

	if (!name || !*name)
		return -ENOENT;
	if (pid <= 0 || !proc_other_root(pid))
		return elf_resolve_path(name, path, len);
	if (!maps_lookup(pid, name, path, len))
		return 0;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	return elf_resolve_under(root, name, path, len);
}

int proc_root_id(pid_t pid, struct proc_root_id *id)
{
	char ns[64], root[64];
	struct stat sn, sr;

	if (pid > 0) {
		snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
		snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	} else {
		snprintf(ns, sizeof(ns), "/proc/self/ns/mnt");
		snprintf(root, sizeof(root), "/");
	}
	if (stat(ns, &sn) || stat(root, &sr))
		return -errno;
	id->mnt_ns = (unsigned long long)sn.st_ino;
	id->root_dev = (unsigned long long)sr.st_dev;
	id->root_ino = (unsigned long long)sr.st_ino;
	return 0;
}

pid_t proc_vpid(pid_t pid)
{
	unsigned long long ns[32];
	int n = proc_status_nums(pid, "NSpid", ns, 32);

	if (n < 0)
		return n;
	return n ? (pid_t)ns[n - 1] : pid;
}
