// SPDX-License-Identifier: MIT
/*
 * The agent's main thread, its shm files (agent_int.h): discovery by
 * inotify and directory scans, the checks a file passes before it is
 * trusted (header, size, owner; a file not ready yet is retried, a
 * corrupt one reported once), binding it to a process and handing it to
 * the drain thread, and noticing the process is gone (pidfd, owner
 * checks).  Retirement, once its last records are spooled, is in
 * agent_spool.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/shmfile.h"
#include "common/cgroup.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/ring/ring.h"

#define PENDING_RETRY_NS   (10 * 1000000ull)
#define PENDING_GIVEUP_NS  (5 * 1000000000ull)
/* /proc/<pid>/maps can take 100 ms to read from a busy process: the
 * pidfd reports exits, the owner check only catches exec() or an unmapped
 * file, so it runs rarely (more often without a pidfd). */
#define OWNER_CHECK_NS       (10 * 1000000000ull)
#define OWNER_CHECK_NOFD_NS  (2 * 1000000000ull)

/* ---- processes ------------------------------------------------------------ */

void agent_proc_free(struct agent *a, struct proc *p)
{
	if (!p)
		return;
	if (p->pidfd >= 0) {
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
		close(p->pidfd);
	}
	proc_release(p);
	agent_dir_put(a, p->dir);
	free(p);
}

/* p's process is gone (or no longer owns the file): the drain thread
 * drains it a last time and hands it back for retire(). */
void agent_mark_gone(struct agent *a, struct proc *p, const char *why)
{
	if (p->gone_why)
		return;
	if (p->pidfd >= 0)
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
	drain_gone(&a->drain, p, why);
}

static int is_bad(struct agent *a, struct shmdir *d, const char *name, dev_t dev, ino_t ino)
{
	for (struct badfile *b = a->bad; b; b = b->next)
		if (b->dir == d && !strcmp(b->name, name) && b->dev == dev && b->ino == ino)
			return 1;
	return 0;
}

static void mark_bad(struct agent *a, struct shmdir *d, const char *name, dev_t dev,
		     ino_t ino)
{
	struct badfile *b = calloc(1, sizeof(*b));

	a->corrupt_files++;
	if (!b)
		return;
	b->dir = d;
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->dev = dev;
	b->ino = ino;
	b->next = a->bad;
	a->bad = b;
}

static struct proc *find_proc(struct agent *a, struct shmdir *d, const char *name)
{
	for (struct proc *p = a->procs; p; p = p->next)
		if (p->dir == d && !strcmp(p->name, name))
			return p;
	return NULL;
}

static void add_pending(struct agent *a, struct shmdir *d, const char *name, uint64_t now)
{
	struct pending *q;

	for (q = a->pending; q; q = q->next)
		if (q->dir == d && !strcmp(q->name, name))
			return;
	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	q->dir = d;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->first_ns = now;
	q->next = a->pending;
	a->pending = q;
	if (!a->retry_armed) {
		agent_arm_timer(a->retryfd, PENDING_RETRY_NS, PENDING_RETRY_NS);
		a->retry_armed = 1;
	}
}

static long sys_pidfd_open(pid_t pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

struct init_arg {
	struct proc *p;
	const struct cursor_tab *t;
};

static int init_cons(void *arg)
{
	struct init_arg *ia = arg;

	return proc_init_cons(ia->p, ia->t);
}

struct copy_arg {
	void *dst;
	const void *src;
	size_t n;
};

static int copy_hdr(void *arg)
{
	struct copy_arg *ca = arg;

	memcpy(ca->dst, ca->src, ca->n);
	return 0;
}

/* The container of process pid (its cgroup, common/cgroup.h) as the tags
 * of its spans, and its cgroup and container as spans(...) reads them. */
static void container_tags(struct proc *p)
{
	char path[4096], name[128], id[CGROUP_ID_LEN + 1];

	p->tags.len = p->tags.n = 0;
	p->cgroup[0] = p->container[0] = '\0';
	if (!p->pid || cgroup_path_of_pid((pid_t)p->pid, path, sizeof(path)))
		return;
	cgroup_container_id(path, name, sizeof(name), id);
	tag_items_container(&p->tags, id, name);
	cgroup_str_cut(p->cgroup, sizeof(p->cgroup), path);
	cgroup_container(path, p->container, sizeof(p->container));
}

/*
 * Bind a validated file: its owner found (the process that maps it: the
 * pid in its name, or for a container's file, or a directory shared with
 * one, the host pid whose own pid namespace numbers it so), its container
 * read, consumers resumed from the cursors, handed to the drain thread,
 * then its pidfd watched.  A file whose process is gone is finished by
 * the drain thread right away.
 */
static int proc_start(struct agent *a, struct proc *p)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->ev };
	const char *orphan = NULL;
	char rs[64] = "", ctr[96] = "";
	int resumed;

	p->pid = shm_owner_pid(p->vpid, p->dev, p->ino);
	if (!p->pid) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%u", p->vpid);
		orphan = access(path, F_OK) ? "process not running"
			: "pid does not map the file: exited or reused";
		p->pid = p->vpid;
	} else {
		container_tags(p);
	}
	resumed = shm_guarded(init_cons, &(struct init_arg){ p, &a->cursors });
	if (resumed < 0)
		return resumed;
	p->pidfd = orphan ? -1 : (int)sys_pidfd_open((pid_t)p->pid);
	if (orphan) {
	} else if (p->pidfd < 0) {
		if (errno != ESRCH)
			pr_warn("%s: pidfd_open(%u): %s; checking the process periodically",
				p->name, p->pid, errstr(errno));
		else
			orphan = "process not running";
	} else if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, p->pidfd, &ev)) {
		close(p->pidfd);
		p->pidfd = -1;
	}
	p->next = a->procs;
	a->procs = p;
	a->procs_seen++;
	p->next_owner_check = clock_monotonic_ns() +
		(p->pidfd >= 0 ? OWNER_CHECK_NS : OWNER_CHECK_NOFD_NS);
	if (resumed)
		snprintf(rs, sizeof(rs), ", %d rings resumed from saved cursors", resumed);
	if (p->tags.len) {
		const uint8_t *t = p->tags.buf;	/* one TAG item: key, value */
		int klen = t[2] | t[3] << 8, vlen = t[4] | t[5] << 8;

		snprintf(ctr, sizeof(ctr), ", %.*s %.*s", klen, (const char *)t + SPANREC_ITEM_HDR,
			 vlen, (const char *)t + SPANREC_ITEM_HDR + klen);
	}
	if (p->pid != p->vpid)
		snprintf(ctr + strlen(ctr), sizeof(ctr) - strlen(ctr), ", pid %u in its namespace",
			 p->vpid);
	pr_info("process %u (%s) seen: %s/%s, %u rings x %u slots, %u span handles%s%s",
		p->pid, p->service, p->dir->label, p->name, p->snap.nrings, p->snap.ring_slots,
		p->snap.npool, rs, ctr);
	drain_add(&a->drain, p);
	if (orphan)
		agent_mark_gone(a, p, orphan);
	return 0;
}

/* The process whose user may own file (dev, ino) of d named for pid:
 * the one that maps it (shm_owner_pid()); when none does, in the agent's
 * own directory the pid named (a running process of another user refuses
 * the file), in a container's none (its pid is not the host's: a file
 * left by a process that is gone is drained and removed). */
static uint32_t owner_pid(const struct shmdir *d, uint32_t pid, dev_t dev, ino_t ino)
{
	uint32_t op = shm_owner_pid(pid, dev, ino);

	return op ? op : d->host ? pid : 0;
}

enum try_res { TRY_IGNORED, TRY_STARTED, TRY_PENDING, TRY_BAD };

/*
 * Look at dir/name: start consuming it, say it is not ready yet (pending:
 * err says why), or report it once when it is corrupt.
 */
static enum try_res try_file(struct agent *a, struct shmdir *d, const char *name, char *err,
			     size_t errlen, dev_t *devp, ino_t *inop)
{
	char path[PATH_MAX];
	struct proc *p = NULL;
	struct stat st;
	void *base = MAP_FAILED;
	enum try_res res = TRY_BAD;
	uint32_t pid;
	uint64_t inst;
	int fd, ret;

	/* a parsed name has no '/': openat() stays in d, and O_NOFOLLOW
	 * refuses a symbolic link planted under that name */
	if (shm_name_parse(name, &pid, &inst) || find_proc(a, d, name))
		return TRY_IGNORED;
	if (snprintf(path, sizeof(path), "%s/%s", d->label, name) >= (int)sizeof(path))
		return TRY_IGNORED;
	fd = openat(d->fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno != ENOENT)
			pr_warn("%s: cannot open: %s", path, errstr(errno));
		return TRY_IGNORED;
	}
	if (fstat(fd, &st)) {
		close(fd);
		return TRY_IGNORED;
	}
	*devp = st.st_dev;
	*inop = st.st_ino;
	if (is_bad(a, d, name, st.st_dev, st.st_ino)) {
		res = TRY_IGNORED;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "not a regular file");
		ret = -EBADMSG;
	} else if (!d->host && st.st_nlink != 1) {
		/* a container's hard link to a file of its root */
		snprintf(err, errlen, "has %lu links, not 1", (unsigned long)st.st_nlink);
		ret = -EBADMSG;
	} else if ((uint64_t)st.st_size > SHM_MAX_FILE_SIZE) {
		snprintf(err, errlen, "file is %lld bytes, above the %" PRIu64 "-byte limit",
			 (long long)st.st_size, SHM_MAX_FILE_SIZE);
		ret = -EBADMSG;
	} else if (!a->o->shm_any_owner && st.st_uid != 0 && st.st_uid != geteuid() &&
		   !shm_owner_ok(owner_pid(d, pid, st.st_dev, st.st_ino), st.st_uid, err, errlen)) {
		ret = -EBADMSG;
	} else if ((uint64_t)st.st_size < FAY_SHM_HDR_SIZE) {
		struct fay_shm_hdr zero = { 0 };

		ret = shm_hdr_validate(&zero, (uint64_t)st.st_size, NULL, err, errlen);
	} else {
		base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (base == MAP_FAILED) {
			snprintf(err, errlen, "mmap: %s", errstr(errno));
			ret = -EBADMSG;
		} else {
			struct fay_shm_hdr h;

			ret = shm_guarded(copy_hdr, &(struct copy_arg){ &h, base, sizeof(h) });
			if (ret)
				snprintf(err, errlen, "the file shrank while its header was read");
			else
				ret = shm_hdr_validate(&h, (uint64_t)st.st_size, name, err, errlen);
			if (!ret && !(p = calloc(1, sizeof(*p)))) {
				snprintf(err, errlen, "out of memory");
				ret = -ENOMEM;
			}
			if (!ret) {
				p->ev.type = EV_PROC;
				p->pidfd = -1;
				snprintf(p->name, sizeof(p->name), "%s", name);
				snprintf(p->path, sizeof(p->path), "%s", path);
				p->dev = st.st_dev;
				p->ino = st.st_ino;
				p->base = base;
				p->size = (size_t)st.st_size;
				p->live = base;
				p->snap = h;
				p->pid = h.pid;
				p->vpid = h.pid;
				p->dir = d;
				d->refs++;
				p->instance = h.instance;
				base = MAP_FAILED;
			}
		}
	}
	if (ret == -EAGAIN) {
		res = TRY_PENDING;
		goto out;
	}
	if (ret) {
		pr_err("shm file %s: %s; skipping it", path, err);
		mark_bad(a, d, name, st.st_dev, st.st_ino);
		goto out;
	}
	ret = proc_start(a, p);
	if (ret) {
		pr_err("shm file %s: cannot start consuming it: %s", path,
		       ret == -EFAULT ? "it shrank while its rings were read" : errstr(ret));
		agent_proc_free(a, p);
		goto out;
	}
	res = TRY_STARTED;
out:
	if (base != MAP_FAILED)
		munmap(base, (size_t)st.st_size);
	close(fd);
	return res;
}

/* A file name seen by inotify or a directory scan. */
static void see_file(struct agent *a, struct shmdir *d, const char *name, uint64_t now)
{
	char err[256];
	dev_t dev;
	ino_t ino;

	if (try_file(a, d, name, err, sizeof(err), &dev, &ino) == TRY_PENDING)
		add_pending(a, d, name, now);
}

void agent_retry_pending(struct agent *a, uint64_t now)
{
	for (struct pending **pp = &a->pending; *pp;) {
		struct pending *q = *pp;
		char err[256];
		dev_t dev;
		ino_t ino;

		if (try_file(a, q->dir, q->name, err, sizeof(err), &dev, &ino) == TRY_PENDING) {
			if (now <= q->first_ns + PENDING_GIVEUP_NS) {
				pp = &q->next;
				continue;
			}
			pr_err("shm file %s/%s: not ready after %llu s (%s); skipping it",
			       q->dir->label, q->name,
			       (unsigned long long)(PENDING_GIVEUP_NS / 1000000000u), err);
			mark_bad(a, q->dir, q->name, dev, ino);
		}
		*pp = q->next;
		free(q);
	}
	if (!a->pending && a->retry_armed) {
		agent_arm_timer(a->retryfd, 0, 0);
		a->retry_armed = 0;
	}
}

void agent_scan_dir(struct agent *a, struct shmdir *sd, uint64_t now)
{
	/* a DIR of its own (the position is the open file's): d->fd stays */
	int fd = openat(sd->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		pr_err("cannot read %s: %s", sd->label, errstr(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		see_file(a, sd, de->d_name, now);
	closedir(d);
}

/* After the first scan: forget cursors of files that no longer exist
 * (their process finished while the agent was being killed). */
void agent_prune_cursors(struct agent *a)
{
	for (uint32_t i = 0; i < a->cursors.n;) {
		uint64_t inst = a->cursors.v[i].instance;
		struct proc *p;

		for (p = a->procs; p && p->instance != inst; p = p->next)
			;
		for (struct pending *q = a->pending; !p && q; q = q->next) {
			uint32_t pid;
			uint64_t qi;

			if (!shm_name_parse(q->name, &pid, &qi) && qi == inst)
				break;
		}
		if (!p) {
			spool_forget(&a->spool, inst);
			continue;
		}
		i++;
	}
}

void agent_on_inotify(struct agent *a, uint64_t now)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(a->inofd, buf, sizeof(buf));

		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const void *)p;

			struct shmdir *d = e->wd >= 0 ? agent_dir_of_wd(a, e->wd) : NULL;

			if (e->mask & IN_Q_OVERFLOW) {
				pr_warn("inotify queue overflowed: rescanning the shm directories");
				for (d = a->dirs; d; d = d->next)
					agent_scan_dir(a, d, now);
			} else if (d && (e->mask & IN_IGNORED)) {
				d->wd = -1;	/* unmounted: scanned by agent_scan_roots() */
			} else if (d && e->len) {
				see_file(a, d, e->name, now);
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* Periodic check that each process still owns its file (an exec() or a
 * fay_shutdown() that unmapped it, or no pidfd to tell us). */
void agent_check_owners(struct agent *a, uint64_t now)
{
	for (struct proc *p = a->procs; p; p = p->next) {
		if (p->gone_why || now < p->next_owner_check)
			continue;
		p->next_owner_check = now + (p->pidfd >= 0 ? OWNER_CHECK_NS : OWNER_CHECK_NOFD_NS);
		if (p->pid && shm_pid_maps_file(p->pid, p->dev, p->ino) == 0)
			agent_mark_gone(a, p, "no longer maps the file");
	}
}
