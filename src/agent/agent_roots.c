// SPDX-License-Identifier: MIT
/*
 * The shm directories the agent drains (agent_int.h, struct shmdir): its
 * own --shm-dir, and the /dev/shm of every container on the host, found
 * without any set-up in the container (issue #25 item 3).
 *
 * libfay in a container writes its file into the container's /dev/shm:
 * a tmpfs of the container's own mount namespace (podman, systemd-nspawn)
 * or a directory of its root (a chroot).  The agent does not see it at
 * its own /dev/shm.  Once a second it lists every process's mount
 * namespace and root directory (two stat() calls a process); for each
 * pair other than its own it opens that root's /dev/shm and watches it
 * with inotify, as it does its own directory.
 *
 * The agent runs as root and the container's files are the container's
 * to plant, so:
 *   - /proc/PID/root is opened once (the kernel's link to the process's
 *     root: the only link followed on purpose), and "dev/shm" is resolved
 *     under it with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): a
 *     symbolic link or ".." in the container resolves inside the
 *     container's root as the container sees it, never to the host's
 *     files, and no /proc magic link is crossed.  A kernel without
 *     openat2() (before 5.6) gets no container directories at all.
 *   - the directory is then only used as a file descriptor: each file is
 *     opened with openat(dirfd, NAME, O_NOFOLLOW) where NAME is a
 *     "fay-<pid>-<hex>.shm" name (no '/'); inotify watches the
 *     directory through /proc/self/fd/N, not a path.
 *   - a file must be a regular file with one link (a hard link to
 *     another file is refused), its owner root or the user of the
 *     process that maps it; that process is found by the pid in the name
 *     (a pid of the container's pid namespace) and its mapping of that
 *     very inode (/proc/PID/maps), never by the name alone
 *     (agent_files.c);
 *   - it is read through a read-only mapping, every field checked
 *     (shmfile.c), as the agent's own files are.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "common/cgroup.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#define ROOT_SCAN_NS (1000 * 1000000ull)
#define DIR_EVENTS (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)

static struct shmdir *dir_new(struct agent *a, int fd, const struct stat *st,
			      const char *label, int host)
{
	struct shmdir *d = calloc(1, sizeof(*d));
	char self[64];

	if (!d)
		return NULL;
	d->fd = fd;
	d->dev = st->st_dev;
	d->ino = st->st_ino;
	d->host = host;
	d->refs = 1;
	snprintf(d->label, sizeof(d->label), "%s", label);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	d->wd = inotify_add_watch(a->inofd, self, DIR_EVENTS);
	if (d->wd < 0)
		pr_warn("cannot watch %s: %s; scanning it once a second", label, errstr(errno));
	/* the agent's own first, containers' after it */
	if (host || !a->dirs) {
		d->next = a->dirs;
		a->dirs = d;
	} else {
		d->next = a->dirs->next;
		a->dirs->next = d;
	}
	return d;
}

int agent_dirs_init(struct agent *a)
{
	struct stat st, ns;
	int fd, ret;

	fd = open(a->o->shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		pr_err("cannot open %s: %s", a->o->shm_dir, errstr(ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (!dir_new(a, fd, &st, a->o->shm_dir, 1)) {
		close(fd);
		return -ENOMEM;
	}
	if (a->dirs->wd < 0) {
		ret = -errno;
		pr_err("cannot watch %s: %s", a->o->shm_dir, errstr(ret));
		return ret;
	}
	a->roots_off = a->o->no_containers;
	if (stat("/proc/self/ns/mnt", &ns) || stat("/proc/self/root", &st)) {
		pr_warn("cannot read fay's own mount namespace and root: containers' /dev/shm "
			"will not be looked into");
		a->roots_off = 1;
		return 0;
	}
	a->own_mntns = ns.st_ino;
	a->own_rdev = st.st_dev;
	a->own_rino = st.st_ino;
	if (!stat("/dev/shm", &st)) {
		a->own_shm_dev = st.st_dev;
		a->own_shm_ino = st.st_ino;
	}
	return 0;
}

/* Free the entries of the list at head (struct pending or struct
 * badfile: next and dir) whose dir is d. */
#define DROP_OF_DIR(head, d)						\
	do {								\
		for (typeof(*(head)) *pp_ = (head); *pp_;) {		\
			typeof(**(head)) *e_ = *pp_;			\
			if (e_->dir == (d)) {				\
				*pp_ = e_->next;			\
				free(e_);				\
			} else {					\
				pp_ = &e_->next;			\
			}						\
		}							\
	} while (0)

void agent_dir_put(struct agent *a, struct shmdir *d)
{
	if (!d || --d->refs)
		return;
	for (struct shmdir **pp = &a->dirs; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	/* its pending and bad entries name it: drop them with it */
	DROP_OF_DIR(&a->pending, d);
	DROP_OF_DIR(&a->bad, d);
	if (d->wd >= 0)
		inotify_rm_watch(a->inofd, d->wd);
	pr_info("%s: no process of that root left; not watched any more", d->label);
	close(d->fd);
	free(d);
}

struct shmdir *agent_dir_of_wd(struct agent *a, int wd)
{
	for (struct shmdir *d = a->dirs; d; d = d->next)
		if (d->wd == wd)
			return d;
	return NULL;
}

void agent_dirs_free(struct agent *a)
{
	for (struct rootkey *k = a->roots, *next; k; k = next) {
		next = k->next;
		free(k);
	}
	for (struct shmdir *d = a->dirs, *next; d; d = next) {
		next = d->next;
		close(d->fd);
		free(d);
	}
	a->roots = NULL;
	a->dirs = NULL;
}

/*
 * The shm directory of process pid's root: "dev/shm" resolved inside it
 * (module comment), an existing shmdir when it is one (the agent's own
 * bind-mounted in, or another process's of the same container), or a new
 * one, watched and scanned.  NULL when it has none.
 */
static struct shmdir *root_dir(struct agent *a, unsigned long pid, uint64_t now)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char path[64];
	struct stat st;
	struct shmdir *d;
	int rootfd, fd;

	snprintf(path, sizeof(path), "/proc/%lu/root", pid);
	rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return NULL;
	fd = (int)syscall(SYS_openat2, rootfd, "dev/shm", &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) {
		pr_warn("this kernel has no openat2() (Linux 5.6): containers' /dev/shm "
			"will not be looked into");
		a->roots_off = 1;
	}
	close(rootfd);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	/* the host's own /dev/shm, seen by a process with a mount namespace
	 * of its own (a service's private /tmp) or before its chroot: the
	 * host's files are not a container's (the agent drains them only
	 * when it is its --shm-dir) */
	if (st.st_dev == a->own_shm_dev && st.st_ino == a->own_shm_ino) {
		close(fd);
		return NULL;
	}
	for (d = a->dirs; d; d = d->next) {
		if (d->dev == st.st_dev && d->ino == st.st_ino) {
			close(fd);
			if (d->host)	/* the agent's own: nothing new */
				return NULL;
			d->refs++;
			return d;
		}
	}
	snprintf(path, sizeof(path), "/proc/%lu/root/dev/shm", pid);
	d = dir_new(a, fd, &st, path, 0);
	if (!d) {
		close(fd);
		return NULL;
	}
	a->ctr_dirs_seen++;
	pr_info("%s: a container's shm directory, watched", d->label);
	agent_scan_dir(a, d, now);
	return d;
}

/* Is process pid in --containers-in's cgroup (or its subtree), or is
 * there no such option? */
static int in_cgroup(struct agent *a, unsigned long pid)
{
	const char *want = a->o->containers_in;
	char path[4096], scope[4096];
	size_t n;

	if (!want)
		return 1;
	if (cgroup_path_of_pid((pid_t)pid, path, sizeof(path)))
		return 0;
	/* "/a/b/" as "/a/b" */
	n = strlen(want);
	while (n > 1 && want[n - 1] == '/')
		n--;
	snprintf(scope, sizeof(scope), "%.*s", (int)n, want);
	return cgroup_path_under(path, scope);
}

void agent_scan_roots(struct agent *a, uint64_t now)
{
	uint64_t gen, t0;
	struct dirent *de;
	DIR *pd;

	if (a->roots_off || now < a->next_root_scan)
		return;
	a->next_root_scan = now + ROOT_SCAN_NS;
	pd = opendir("/proc");
	if (!pd)
		return;
	t0 = clock_monotonic_ns();
	gen = ++a->root_gen;
	while ((de = readdir(pd)) && !a->roots_off) {
		char path[64], *end;
		struct stat ns, rt;
		struct rootkey *k;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%lu/ns/mnt", pid);
		if (stat(path, &ns))
			continue;
		snprintf(path, sizeof(path), "/proc/%lu/root", pid);
		if (stat(path, &rt))
			continue;
		if (ns.st_ino == a->own_mntns && rt.st_dev == a->own_rdev &&
		    rt.st_ino == a->own_rino)
			continue;
		for (k = a->roots; k; k = k->next)
			if (k->mntns == ns.st_ino && k->rdev == rt.st_dev && k->rino == rt.st_ino)
				break;
		if (k) {
			k->gen = gen;
			continue;
		}
		k = calloc(1, sizeof(*k));
		if (!k)
			break;
		k->mntns = ns.st_ino;
		k->rdev = rt.st_dev;
		k->rino = rt.st_ino;
		k->gen = gen;
		if (in_cgroup(a, pid))
			k->dir = root_dir(a, pid, now);
		k->next = a->roots;
		a->roots = k;
	}
	closedir(pd);
	for (struct rootkey **kp = &a->roots; *kp;) {
		struct rootkey *k = *kp;

		if (k->gen == gen) {
			kp = &k->next;
			continue;
		}
		*kp = k->next;
		agent_dir_put(a, k->dir);
		free(k);
	}
	/* a directory inotify could not watch: scanned each time */
	for (struct shmdir *d = a->dirs; d; d = d->next)
		if (d->wd < 0 && !d->host)
			agent_scan_dir(a, d, now);
	a->root_scans++;
	t0 = clock_monotonic_ns() - t0;
	a->root_scan_last_ns = t0;
	if (t0 > a->root_scan_max_ns)
		a->root_scan_max_ns = t0;
}
