// SPDX-License-Identifier: MIT
/*
 * `fay agent`: two threads.
 *
 * The drain thread (drain.c) reads the rings into sealed in-memory batches
 * and does nothing else: no file, /proc or socket I/O can hold up a drain.
 *
 * The main thread runs one epoll loop.  Sources:
 *   eventfd (queue)  sealed batches: write each to the spool, then retire
 *                    the processes whose last records it holds
 *   timerfd (tick)   housekeeping: retry a spool write that failed, save
 *                    the cursor file now and then, check owners, connect,
 *                    stats
 *   timerfd (retry)  files seen but not ready yet (INIT, too small)
 *   inotify          new fay-*.shm files in the shm directory
 *   pidfd per file   its process exited: tell the drain thread
 *   socket           the collector (ship.c)
 *   signalfd         SIGTERM/SIGINT: last drain, spool, ship for up to 2 s
 * The durability protocol (spool before anything depends on a batch; the
 * cursor file saved before a spool file it supersedes is deleted) is
 * described in agent.h and docs/ABI.md section 5.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/bqueue.h"
#include "agent/drain.h"
#include "agent/qclient.h"
#include "agent/shmfile.h"
#include "agent/spantap.h"
#include "agent/spool.h"
#include "agent/ship.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"
#include "common/rand.h"
#include "common/secret.h"
#include "common/tls.h"
#include "common/ring/ring.h"
#include "common/version.h"

#define PENDING_RETRY_NS   (10 * 1000000ull)
#define PENDING_GIVEUP_NS  (5 * 1000000000ull)
/* /proc/<pid>/maps can take 100 ms to read from a busy process: the
 * pidfd reports exits, the owner check only catches exec() or an unmapped
 * file, so it runs rarely (more often without a pidfd). */
#define OWNER_CHECK_NS       (10 * 1000000000ull)
#define OWNER_CHECK_NOFD_NS  (2 * 1000000000ull)
#define CURSOR_SAVE_NS     (1000 * 1000000ull)
#define HOUSE_TICK_MAX_NS  (100 * 1000000ull)
#define SHUTDOWN_SEND_NS   (2 * 1000000000ull)

enum ev_type { EV_TICK, EV_RETRY, EV_INOTIFY, EV_SIGNAL, EV_SOCK, EV_PROC, EV_QUEUE };

struct pending {
	struct pending *next;
	char name[NAME_MAX + 1];
	uint64_t first_ns;
};

/* A file reported corrupt once: not looked at again unless replaced. */
struct badfile {
	struct badfile *next;
	char name[NAME_MAX + 1];
	dev_t dev;
	ino_t ino;
};

struct agent {
	const struct agent_opts *o;
	int epfd, tickfd, retryfd, inofd, sigfd;
	struct evsrc ev_tick, ev_retry, ev_ino, ev_sig, ev_sock, ev_queue;
	int lockfd;
	char agent_id[33];
	struct qclient *qc;	/* the query connection (cluster queries) */
	struct spantap *tap;	/* spans(...) queries: fed by the drain thread */
	char cursors_path[PATH_MAX], stats_path[PATH_MAX];

	/* Every process from discovery to retirement (the drain thread has
	 * its own list of those it drains). */
	struct proc *procs;
	struct proc *dead;      /* retired this round of events, freed after it */
	struct pending *pending;
	struct badfile *bad;
	int retry_armed;

	struct bqueue q;
	struct drain drain;
	int q_ready, drain_ready;
	struct cursor_tab cursors;
	struct spool spool;
	struct ship ship;
	uint64_t next_seq;
	int spool_blocked;      /* the last spool write failed: retried on ticks */
	uint64_t next_save_ns;

	uint64_t procs_seen, procs_gone, corrupt_files;
	uint64_t batches_spooled, spans_spooled;
	uint64_t max_put_ns, max_save_ns;
	uint64_t start_ns, next_stats_ns;

	int stopping;
	uint64_t stop_deadline;

	/* Testpoints (tests only).  FAY_AGENT_CRASH_AFTER_SPOOL=N kills the
	 * agent with SIGKILL right after its Nth batch reached the spool,
	 * before the cursor file is saved: the window the spool trailers
	 * cover.  FAY_AGENT_TEST_HOLD_SPOOL=FILE: while FILE exists, no
	 * batch is written to the spool (a disk that does not answer). */
	long crash_after_spool;
	const char *hold_spool;
};

/* ---- helpers ------------------------------------------------------------- */

static int write_file_atomic(const char *path, const void *buf, size_t len)
{
	char tmp[PATH_MAX + 8];
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len)
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* state-dir/agent_id: 32 hex digits, made once. */
static int load_agent_id(struct agent *a)
{
	char path[PATH_MAX], buf[64] = "";
	uint8_t id[16];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/agent_id", a->o->state_dir);
	f = fopen(path, "re");
	if (f) {
		int good = fgets(buf, sizeof(buf), f) && strspn(buf, "0123456789abcdef") == 32;

		fclose(f);
		if (good) {
			memcpy(a->agent_id, buf, 32);
			a->agent_id[32] = '\0';
			return 0;
		}
		pr_warn("%s is not 32 hex digits; making a new agent id", path);
	}
	ret = rand_bytes(id, sizeof(id));
	if (ret)
		return ret;
	for (int i = 0; i < 16; i++)
		snprintf(a->agent_id + 2 * i, 3, "%02x", id[i]);
	snprintf(buf, sizeof(buf), "%s\n", a->agent_id);
	return write_file_atomic(path, buf, 33);
}

static void arm_timer(int fd, uint64_t first_ns, uint64_t interval_ns)
{
	struct itimerspec its = {
		.it_value = { (time_t)(first_ns / 1000000000u), (long)(first_ns % 1000000000u) },
		.it_interval = { (time_t)(interval_ns / 1000000000u),
				 (long)(interval_ns % 1000000000u) },
	};

	timerfd_settime(fd, 0, &its, NULL);
}

/* ---- spooling (the drain thread's batches) ------------------------------- */

static void save_cursors(struct agent *a, uint64_t now)
{
	uint64_t t0 = clock_monotonic_ns(), dt;
	int ret = spool_save_cursors(&a->spool);

	dt = clock_monotonic_ns() - t0;
	if (dt > a->max_save_ns)
		a->max_save_ns = dt;
	a->next_save_ns = now + CURSOR_SAVE_NS;
	if (ret)
		pr_err("cannot write %s: %s (the spooled batch trailers still hold the cursors)",
		       a->cursors_path, errstr(ret));
}

/* The cursor file: at most once per CURSOR_SAVE_NS, when it is behind
 * the spool or ACKed batch files wait for it (force: now). */
static void maybe_save(struct agent *a, uint64_t now, int force)
{
	if (!a->spool.dirty && !a->spool.nacked)
		return;
	if (force || now >= a->next_save_ns)
		save_cursors(a, now);
}

/*
 * p's last records are spooled: remove its file, then forget its cursors
 * (killed in between, the next agent finds stale cursors, pruned at start,
 * rather than the file without cursors, which it would ship again).
 */
static void retire(struct agent *a, struct proc *p)
{
	const struct proc_counts *n = &p->n;

	if (unlink(p->path) && errno != ENOENT)
		pr_warn("cannot remove %s: %s; keeping its cursors", p->path, errstr(errno));
	else
		spool_forget(&a->spool, p->instance);
	pr_info("process %u (%s) gone (%s): %" PRIu64 " spans shipped to the spool; lost: "
		"%" PRIu64 " ring overwrite, %" PRIu64 " died mid-span, %" PRIu64 " no handle, %"
		PRIu64 " no ring, %" PRIu64 " no room, %" PRIu64 " too big, %" PRIu64
		" bad records, %" PRIu64 " nested; %" PRIu64 " truncated", p->pid, p->service,
		p->why, n->drained, n->ring_lost, n->died_mid_span, n->lost_no_handle,
		n->lost_no_ring, n->lost_no_room, n->lost_too_big + n->too_big, n->bad,
		n->lost_nested, n->truncated);
	if (n->died_mid_span)
		pr_warn("process %u (%s): %" PRIu64 " spans lost: process died mid-span",
			p->pid, p->service, n->died_mid_span);
	a->procs_gone++;
	for (struct proc **pp = &a->procs; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->next = a->dead;
	a->dead = p;
}

/* Write one sealed batch to the spool.  Returns 0 or -errno (kept in the
 * queue, tried again on the next tick). */
static int spool_batch(struct agent *a, struct qbatch *qb, uint64_t now)
{
	uint64_t seq = a->next_seq, t0, dt;
	uint32_t flen;
	int ret;

	if (!qb->b.count)
		return 0;
	flen = wire_batch_seal(&qb->b, seq);
	t0 = clock_monotonic_ns();
	ret = spool_put(&a->spool, qb->b.buf, flen, qb->b.count, qb->trail, qb->ntrail);
	dt = clock_monotonic_ns() - t0;
	if (dt > a->max_put_ns)
		a->max_put_ns = dt;
	if (ret) {
		if (!a->spool_blocked)
			pr_err("spool: cannot write batch %" PRIu64 " to %s: %s; holding it (batches "
			       "wait in memory, up to --queue-max, then the rings)",
			       seq, a->spool.dir, errstr(ret));
		a->spool_blocked = 1;
		return ret;
	}
	if (a->spool_blocked)
		pr_info("spool: writing again (batch %" PRIu64 ")", seq);
	a->spool_blocked = 0;
	a->next_seq = seq + 1;
	if (a->crash_after_spool && !--a->crash_after_spool) {
		pr_warn("testpoint: batch %" PRIu64 " spooled, cursors not saved: SIGKILL", seq);
		raise(SIGKILL);
	}
	a->batches_spooled++;
	a->spans_spooled += qb->b.count;
	(void)now;
	return 0;
}

/* Spool every queued batch, in order, and retire what they carry. */
static void on_queue(struct agent *a, uint64_t now)
{
	uint64_t v;
	int n = 0;

	if (read(a->q.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	for (;;) {
		struct qbatch *qb = bqueue_peek(&a->q);

		if (!qb)
			break;
		if (a->hold_spool && !access(a->hold_spool, F_OK))
			break;
		if (spool_batch(a, qb, now))
			break;
		while (qb->retired) {
			struct proc *p = qb->retired;

			qb->retired = p->dnext;
			retire(a, p);
		}
		bqueue_pop(&a->q);
		n++;
	}
	if (n)
		ship_pump(&a->ship, clock_monotonic_ns());
}

/* ---- processes ------------------------------------------------------------ */

static void proc_free(struct agent *a, struct proc *p)
{
	if (!p)
		return;
	if (p->pidfd >= 0) {
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
		close(p->pidfd);
	}
	proc_release(p);
	free(p);
}

/* p's process is gone (or no longer owns the file): the drain thread
 * drains it a last time and hands it back for retire(). */
static void mark_gone(struct agent *a, struct proc *p, const char *why)
{
	if (p->gone_why)
		return;
	if (p->pidfd >= 0)
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
	drain_gone(&a->drain, p, why);
}

static int is_bad(struct agent *a, const char *name, dev_t dev, ino_t ino)
{
	for (struct badfile *b = a->bad; b; b = b->next)
		if (!strcmp(b->name, name) && b->dev == dev && b->ino == ino)
			return 1;
	return 0;
}

static void mark_bad(struct agent *a, const char *name, dev_t dev, ino_t ino)
{
	struct badfile *b = calloc(1, sizeof(*b));

	a->corrupt_files++;
	if (!b)
		return;
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->dev = dev;
	b->ino = ino;
	b->next = a->bad;
	a->bad = b;
}

static struct proc *find_proc(struct agent *a, const char *name)
{
	for (struct proc *p = a->procs; p; p = p->next)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

static void add_pending(struct agent *a, const char *name, uint64_t now)
{
	struct pending *q;

	for (q = a->pending; q; q = q->next)
		if (!strcmp(q->name, name))
			return;
	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->first_ns = now;
	q->next = a->pending;
	a->pending = q;
	if (!a->retry_armed) {
		arm_timer(a->retryfd, PENDING_RETRY_NS, PENDING_RETRY_NS);
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

/*
 * Bind a validated file: consumers resumed from the cursors, handed to
 * the drain thread at once, then its pidfd watched and its owner checked
 * (a slow /proc read, done after the drain has started).  A file whose
 * process is gone is finished by the drain thread right away.
 */
static int proc_start(struct agent *a, struct proc *p)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->ev };
	const char *orphan = NULL;
	char rs[64] = "";
	int owner, resumed;

	resumed = shm_guarded(init_cons, &(struct init_arg){ p, &a->cursors });
	if (resumed < 0)
		return resumed;
	p->pidfd = (int)sys_pidfd_open((pid_t)p->pid);
	if (p->pidfd < 0) {
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
	pr_info("process %u (%s) seen: %s, %u rings x %u slots, %u span handles%s",
		p->pid, p->service, p->name, p->snap.nrings, p->snap.ring_slots, p->snap.npool, rs);
	drain_add(&a->drain, p);
	if (!orphan) {
		owner = shm_pid_maps_file(p->pid, p->dev, p->ino);
		if (owner == 0)
			orphan = "pid does not map the file: exited or reused";
		else if (owner < 0)
			pr_debug("%s: cannot read /proc/%u/maps (%s): trusting the pid",
				 p->name, p->pid, errstr(owner));
	}
	if (orphan)
		mark_gone(a, p, orphan);
	return 0;
}

enum try_res { TRY_IGNORED, TRY_STARTED, TRY_PENDING, TRY_BAD };

/*
 * Look at dir/name: start consuming it, say it is not ready yet (pending:
 * err says why), or report it once when it is corrupt.
 */
static enum try_res try_file(struct agent *a, const char *name, char *err, size_t errlen,
			     dev_t *devp, ino_t *inop)
{
	char path[PATH_MAX];
	struct proc *p = NULL;
	struct stat st;
	void *base = MAP_FAILED;
	enum try_res res = TRY_BAD;
	uint32_t pid;
	uint64_t inst;
	int fd, ret;

	if (shm_name_parse(name, &pid, &inst) || find_proc(a, name))
		return TRY_IGNORED;
	if (snprintf(path, sizeof(path), "%s/%s", a->o->shm_dir, name) >= (int)sizeof(path))
		return TRY_IGNORED;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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
	if (is_bad(a, name, st.st_dev, st.st_ino)) {
		res = TRY_IGNORED;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "not a regular file");
		ret = -EBADMSG;
	} else if ((uint64_t)st.st_size > SHM_MAX_FILE_SIZE) {
		snprintf(err, errlen, "file is %lld bytes, above the %" PRIu64 "-byte limit",
			 (long long)st.st_size, SHM_MAX_FILE_SIZE);
		ret = -EBADMSG;
	} else if (!a->o->shm_any_owner && !shm_owner_ok(pid, st.st_uid, err, errlen)) {
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
		mark_bad(a, name, st.st_dev, st.st_ino);
		goto out;
	}
	ret = proc_start(a, p);
	if (ret) {
		pr_err("shm file %s: cannot start consuming it: %s", path,
		       ret == -EFAULT ? "it shrank while its rings were read" : errstr(ret));
		proc_free(a, p);
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
static void see_file(struct agent *a, const char *name, uint64_t now)
{
	char err[256];
	dev_t dev;
	ino_t ino;

	if (try_file(a, name, err, sizeof(err), &dev, &ino) == TRY_PENDING)
		add_pending(a, name, now);
}

static void retry_pending(struct agent *a, uint64_t now)
{
	for (struct pending **pp = &a->pending; *pp;) {
		struct pending *q = *pp;
		char err[256];
		dev_t dev;
		ino_t ino;

		if (try_file(a, q->name, err, sizeof(err), &dev, &ino) == TRY_PENDING) {
			if (now <= q->first_ns + PENDING_GIVEUP_NS) {
				pp = &q->next;
				continue;
			}
			pr_err("shm file %s/%s: not ready after %llu s (%s); skipping it",
			       a->o->shm_dir, q->name,
			       (unsigned long long)(PENDING_GIVEUP_NS / 1000000000u), err);
			mark_bad(a, q->name, dev, ino);
		}
		*pp = q->next;
		free(q);
	}
	if (!a->pending && a->retry_armed) {
		arm_timer(a->retryfd, 0, 0);
		a->retry_armed = 0;
	}
}

static void scan_dir(struct agent *a, uint64_t now)
{
	DIR *d = opendir(a->o->shm_dir);
	struct dirent *de;

	if (!d) {
		pr_err("cannot read %s: %s", a->o->shm_dir, errstr(errno));
		return;
	}
	while ((de = readdir(d)))
		see_file(a, de->d_name, now);
	closedir(d);
}

/* After the first scan: forget cursors of files that no longer exist
 * (their process finished while the agent was being killed). */
static void prune_cursors(struct agent *a)
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

static void on_inotify(struct agent *a, uint64_t now)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(a->inofd, buf, sizeof(buf));

		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const void *)p;

			if (e->mask & IN_Q_OVERFLOW) {
				pr_warn("inotify queue overflowed: rescanning %s", a->o->shm_dir);
				scan_dir(a, now);
			} else if (e->len) {
				see_file(a, e->name, now);
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* Periodic check that each process still owns its file (an exec() or a
 * fay_shutdown() that unmapped it, or no pidfd to tell us). */
static void check_owners(struct agent *a, uint64_t now)
{
	for (struct proc *p = a->procs; p; p = p->next) {
		if (p->gone_why || now < p->next_owner_check)
			continue;
		p->next_owner_check = now + (p->pidfd >= 0 ? OWNER_CHECK_NS : OWNER_CHECK_NOFD_NS);
		if (shm_pid_maps_file(p->pid, p->dev, p->ino) == 0)
			mark_gone(a, p, "no longer maps the file");
	}
}

/* ---- stats ------------------------------------------------------------------ */

static char *stats_json(struct agent *a, uint64_t now)
{
	struct drain_stats ds;
	struct proc_counts t;
	json_t *j;
	char *s;

	drain_get_stats(&a->drain, &ds);
	t = ds.n;
	j = json_pack("{s:s, s:s, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}}",
		      "agent_id", a->agent_id, "host", a->o->host, "version", FAY_VERSION,
		      "uptime_s", (json_int_t)((now - a->start_ns) / 1000000000u),
		      "processes", "live", (json_int_t)(a->procs_seen - a->procs_gone),
		      "seen", (json_int_t)a->procs_seen, "gone", (json_int_t)a->procs_gone,
		      "corrupt_files", (json_int_t)a->corrupt_files,
		      "shrunk_files", (json_int_t)ds.shrunk_files,
		      "rings", (json_int_t)ds.nrings,
		      "records_drained", (json_int_t)t.drained,
		      "bad_records", (json_int_t)t.bad,
		      "other_records", (json_int_t)t.other,
		      "lost",
		      "ring_overwrite", (json_int_t)t.ring_lost,
		      "died_mid_span", (json_int_t)t.died_mid_span,
		      "no_handle", (json_int_t)t.lost_no_handle,
		      "no_ring", (json_int_t)t.lost_no_ring,
		      "no_room", (json_int_t)t.lost_no_room,
		      "too_big", (json_int_t)(t.lost_too_big + t.too_big),
		      "nested", (json_int_t)t.lost_nested,
		      "bad_record", (json_int_t)t.bad,
		      "spool_evicted", (json_int_t)a->spool.evicted_spans,
		      "spool_damaged", (json_int_t)a->spool.damaged_spans,
		      "collector_rejected", (json_int_t)a->ship.spans_rejected,
		      "truncated", (json_int_t)t.truncated,
		      "spans_started", (json_int_t)t.spans_started,
		      "corrupt_slots", (json_int_t)t.corrupt,
		      "spool",
		      "bytes", (json_int_t)a->spool.bytes,
		      "batches", (json_int_t)spool_unacked(&a->spool),
		      "evicted_batches", (json_int_t)a->spool.evicted_batches,
		      "evicted_spans", (json_int_t)a->spool.evicted_spans,
		      "damaged_files", (json_int_t)a->spool.corrupt_files,
		      "cursor_saves", (json_int_t)a->spool.saves,
		      "max_write_ms", (json_int_t)(a->max_put_ns / 1000000),
		      "max_cursor_save_ms", (json_int_t)(a->max_save_ns / 1000000),
		      "shipping",
		      "batches_spooled", (json_int_t)a->batches_spooled,
		      "spans_spooled", (json_int_t)a->spans_spooled,
		      "batches_acked", (json_int_t)a->ship.batches_acked,
		      "spans_acked", (json_int_t)a->ship.spans_acked,
		      "batches_nacked", (json_int_t)a->ship.batches_nacked,
		      "connects", (json_int_t)a->ship.connects,
		      "connected", (json_int_t)(a->ship.state == SHIP_READY),
		      "drain",
		      "passes", (json_int_t)ds.ticks,
		      "max_gap_ms", (json_int_t)(ds.max_gap_ns / 1000000),
		      "max_pass_ms", (json_int_t)(ds.max_pass_ns / 1000000),
		      "batches", (json_int_t)ds.sealed,
		      "queue_max", (json_int_t)a->q.max,
		      "queue_hwm", (json_int_t)a->q.hwm,
		      "stalls", (json_int_t)ds.stalls,
		      "stalled_ms", (json_int_t)(ds.stalled_ns / 1000000),
		      "fast_tick", ds.fast_tick);
	if (!j)
		return NULL;
	if (a->tap) {
		uint64_t fed, dropped;

		spantap_counts(a->tap, &fed, &dropped);
		json_object_set_new(j, "span_queries",
				    json_pack("{s:I, s:I}", "spans_fed", (json_int_t)fed,
					      "blkin_given_up", (json_int_t)dropped));
	}
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static void do_stats(struct agent *a, uint64_t now, int send)
{
	char *s = stats_json(a, now);
	int ret;

	if (!s)
		return;
	ret = write_file_atomic(a->stats_path, s, strlen(s));
	if (ret)
		pr_debug("cannot write %s: %s", a->stats_path, errstr(ret));
	if (send)
		ship_send_stats(&a->ship, s, strlen(s), now);
	free(s);
}

/* ---- the loop ------------------------------------------------------------- */

static void on_tick(struct agent *a, uint64_t now)
{
	uint64_t exp;

	if (read(a->tickfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
		return;
	if (a->spool_blocked || a->hold_spool)
		on_queue(a, now);
	check_owners(a, now);
	if (a->pending)
		retry_pending(a, now);
	ship_tick(&a->ship, now);
	maybe_save(a, now, 0);
	if (now >= a->next_stats_ns) {
		do_stats(a, now, 1);
		a->next_stats_ns = now + a->o->stats_ns;
	}
}

static int setup(struct agent *a)
{
	struct epoll_event ev = { .events = EPOLLIN };
	char path[PATH_MAX], err[300];
	sigset_t ss;
	int ret;

	a->epfd = a->tickfd = a->retryfd = a->inofd = a->sigfd = a->lockfd = -1;
	a->ev_tick.type = EV_TICK;
	a->ev_retry.type = EV_RETRY;
	a->ev_ino.type = EV_INOTIFY;
	a->ev_sig.type = EV_SIGNAL;
	a->ev_sock.type = EV_SOCK;
	a->ev_queue.type = EV_QUEUE;
	a->start_ns = clock_monotonic_ns();
	if (getenv("FAY_AGENT_CRASH_AFTER_SPOOL"))
		a->crash_after_spool = atol(getenv("FAY_AGENT_CRASH_AFTER_SPOOL"));
	a->hold_spool = getenv("FAY_AGENT_TEST_HOLD_SPOOL");

	ret = agent_mkdir_p(a->o->state_dir);
	if (ret) {
		pr_err("cannot create state directory %s: %s", a->o->state_dir, errstr(ret));
		return ret;
	}
	snprintf(path, sizeof(path), "%s/lock", a->o->state_dir);
	a->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (a->lockfd < 0 || flock(a->lockfd, LOCK_EX | LOCK_NB)) {
		ret = -errno;
		pr_err("state directory %s is in use by another fay agent (%s): %s",
		       a->o->state_dir, path, errstr(ret));
		return ret;
	}
	ret = load_agent_id(a);
	if (ret) {
		pr_err("cannot make %s/agent_id: %s", a->o->state_dir, errstr(ret));
		return ret;
	}
	snprintf(a->cursors_path, sizeof(a->cursors_path), "%s/cursors", a->o->state_dir);
	snprintf(a->stats_path, sizeof(a->stats_path), "%s/stats.json", a->o->state_dir);
	ret = cursor_load(a->cursors_path, &a->cursors, err, sizeof(err));
	if (ret == -EBADMSG) {
		pr_err("%s; starting without saved cursors (rings are read from their oldest record)",
		       err);
	} else if (ret) {
		pr_err("cannot read %s: %s", a->cursors_path, errstr(ret));
		return ret;
	}
	snprintf(path, sizeof(path), "%s/spool", a->o->state_dir);
	ret = spool_open(&a->spool, path, a->cursors_path, a->o->spool_max, a->o->fsync,
			 &a->cursors);
	if (ret) {
		pr_err("cannot open the spool %s: %s", path, errstr(ret));
		return ret;
	}
	/* spool_open moved cursors.seq up to the newest spooled batch.
	 * Batches drained but never spooled may have had higher seqs: they
	 * were never sent, so those seqs are free again. */
	a->next_seq = a->cursors.seq + 1;
	ret = bqueue_init(&a->q, (uint32_t)(a->o->queue_max / BATCH_MAX_BYTES));
	if (ret) {
		pr_err("cannot set up the batch queue: %s", errstr(ret));
		return ret;
	}
	a->q_ready = 1;
	ret = drain_init(&a->drain, &a->q, a->o->flush_ns);
	if (ret) {
		pr_err("cannot set up the drain thread: %s", errstr(ret));
		return ret;
	}
	a->drain_ready = 1;
	a->drain.nice = a->o->drain_nice;
	a->tap = spantap_new();
	if (!a->tap)
		pr_warn("cannot set up the span tap: %s; spans(...) queries will not run here",
			errstr(-errno));
	a->drain.tap = a->tap;

	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->retryfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (a->epfd < 0 || a->tickfd < 0 || a->retryfd < 0 || a->inofd < 0) {
		ret = -errno;
		pr_err("cannot set up the event loop: %s", errstr(ret));
		return ret;
	}
	if (mkdir(a->o->shm_dir, 01777) && errno != EEXIST) {
		ret = -errno;
		pr_err("cannot create shm directory %s: %s", a->o->shm_dir, errstr(ret));
		return ret;
	}
	if (inotify_add_watch(a->inofd, a->o->shm_dir, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0) {
		ret = -errno;
		pr_err("cannot watch %s: %s", a->o->shm_dir, errstr(ret));
		return ret;
	}
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	a->sigfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0) {
		ret = -errno;
		pr_err("signalfd: %s", errstr(ret));
		return ret;
	}
	ev.data.ptr = &a->ev_tick;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->tickfd, &ev);
	ev.data.ptr = &a->ev_retry;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->retryfd, &ev);
	ev.data.ptr = &a->ev_ino;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->inofd, &ev);
	ev.data.ptr = &a->ev_sig;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->sigfd, &ev);
	ev.data.ptr = &a->ev_queue;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->q.efd, &ev);

	{
		struct wire_hello hm = { 0 };

		uint64_t sess[2] = { rand_u64(), rand_u64() };

		snprintf(hm.agent_id, sizeof(hm.agent_id), "%s", a->agent_id);
		snprintf(hm.version, sizeof(hm.version), "%s", FAY_VERSION);
		/* this process's: the collector tells our reconnects from another
		 * agent that has our id (a cloned state directory) */
		snprintf(hm.session, sizeof(hm.session), "%016" PRIx64 "%016" PRIx64,
			 sess[0], sess[1]);
		if (strlen(a->o->host) >= sizeof(hm.host) ||
		    (a->o->token && strlen(a->o->token) >= sizeof(hm.token))) {
			pr_err("%s is longer than %zu bytes", strlen(a->o->host) >= sizeof(hm.host) ?
			       "the host name" : "the token", sizeof(hm.host) - 1);
			return -EINVAL;
		}
		snprintf(hm.host, sizeof(hm.host), "%s", a->o->host);
		snprintf(hm.token, sizeof(hm.token), "%s", a->o->token ? a->o->token : "");
		{
			/* The HELLO is JSON: refuse now what it cannot carry. */
			struct wire_buf wb = { 0 };

			ret = wire_put_hello(&wb, &hm);
			wire_buf_free(&wb);
			if (ret) {
				pr_err("the host name or the token cannot be sent (not UTF-8?)");
				return -EINVAL;
			}
		}
		ret = ship_init(&a->ship, a->o->collector, &hm, &a->spool,
				&a->next_seq, a->epfd, &a->ev_sock);
		a->ship.tls = a->o->tls;
		if (ret == -ENOMEM)
			return ret;
		if (ret) {
			pr_err("bad collector address '%s' (want HOST:PORT)", a->o->collector);
			return ret;
		}
	}
	pr_info("agent %s on %s: shm %s, state %s, collector %s, %" PRIu64
		" batches (%" PRIu64 " bytes) spooled, next batch %" PRIu64 ", %u MiB of batch buffers",
		a->agent_id, a->o->host, a->o->shm_dir, a->o->state_dir, a->o->collector,
		a->spool.nbatches, a->spool.bytes, a->next_seq, a->q.max);
	return 0;
}

static void free_dead(struct agent *a)
{
	while (a->dead) {
		struct proc *p = a->dead;

		a->dead = p->next;
		proc_free(a, p);
	}
}

static void teardown(struct agent *a)
{
	qclient_stop(a->qc);	/* every query's probes detached */
	/* The drain thread first: it may still be reading the procs. */
	if (a->drain_ready)
		drain_free(&a->drain);
	spantap_free(a->tap);	/* no query and no drain feeds it now */
	a->tap = NULL;
	free_dead(a);
	while (a->procs) {
		struct proc *p = a->procs;

		a->procs = p->next;
		proc_free(a, p);
	}
	while (a->pending) {
		struct pending *q = a->pending;

		a->pending = q->next;
		free(q);
	}
	while (a->bad) {
		struct badfile *b = a->bad;

		a->bad = b->next;
		free(b);
	}
	ship_free(&a->ship);
	spool_close(&a->spool);
	if (a->q_ready)
		bqueue_free(&a->q);
	cursor_tab_free(&a->cursors);
	for (int *fd = &a->epfd; fd <= &a->sigfd; fd++)
		if (*fd >= 0)
			close(*fd);
	if (a->lockfd >= 0)
		close(a->lockfd);
}


/* SIGHUP: the token file and the TLS files again, for the next HELLOs and
 * handshakes (the connections open now keep theirs). */
static void reload(struct agent *a)
{
	char tok[512], why[600] = "";

	if (a->o->token_file) {
		if (secret_file_token(a->o->token_file, tok, sizeof(tok), why, sizeof(why)) ||
		    strlen(tok) >= sizeof(a->ship.hello.token)) {
			pr_warn("reload: --token-file refused, the token stays as it was: %s",
				*why ? why : "longer than a HELLO carries");
		} else {
			snprintf(a->ship.hello.token, sizeof(a->ship.hello.token), "%s", tok);
			qclient_set_token(a->qc, tok);
			pr_info("reload: --token-file %s read again; the next HELLO sends it",
				a->o->token_file);
		}
		explicit_bzero(tok, sizeof(tok));
	}
	if (a->o->tls) {
		if (tls_conf_reload(a->o->tls, a->o->tls_cert, a->o->tls_key, a->o->tls_ca, why,
				    sizeof(why)))
			pr_warn("reload: TLS files refused, new connections go on with the old ones: %s",
				why);
		else
			pr_info("reload: TLS files read again; new connections use them");
	}
}
int agent_run(const struct agent_opts *o)
{
	struct agent a = { .o = o };
	struct epoll_event evs[32];
	uint64_t house = o->flush_ns < HOUSE_TICK_MAX_NS ? o->flush_ns : HOUSE_TICK_MAX_NS;
	int ret;

	ret = setup(&a);
	if (ret)
		goto out;
	ret = shm_guard_install();
	if (ret) {
		pr_err("cannot install the SIGBUS handler: %s", errstr(ret));
		goto out;
	}
	net_raise_nofile();	/* a pidfd per traced process, spool files */
	ret = drain_start(&a.drain);
	if (ret) {
		pr_err("cannot start the drain thread: %s", errstr(ret));
		goto out;
	}
	/* Already-present files, then promptly through inotify. */
	scan_dir(&a, clock_monotonic_ns());
	prune_cursors(&a);
	maybe_save(&a, clock_monotonic_ns(), 1);
	arm_timer(a.tickfd, house, house);
	a.next_stats_ns = clock_monotonic_ns() + o->stats_ns;
	ship_tick(&a.ship, clock_monotonic_ns());
	{
		struct qclient_opts qo = {
			.collector = o->collector, .host = o->host,
			.agent_id = a.agent_id, .token = o->token, .tls = o->tls, .tap = a.tap,
			.allow_other_users = o->allow_other_users,
			.inject_lib = o->inject_lib, .no_inject = o->no_inject,
		};

		a.qc = qclient_start(&qo);
		if (!a.qc)
			pr_warn("cannot start the query connection: %s; cluster queries will not run here",
				errstr(-errno));
	}

	for (;;) {
		int n = epoll_wait(a.epfd, evs, 32, 1000);
		uint64_t now = clock_monotonic_ns();

		if (n < 0 && errno != EINTR) {
			ret = -errno;
			pr_err("epoll_wait: %s", errstr(ret));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct evsrc *src = evs[i].data.ptr;

			switch (src->type) {
			case EV_TICK:
				on_tick(&a, now);
				break;
			case EV_QUEUE:
				on_queue(&a, now);
				break;
			case EV_RETRY: {
				uint64_t exp;

				if (read(a.retryfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
					break;
				retry_pending(&a, now);
				break;
			}
			case EV_INOTIFY:
				on_inotify(&a, now);
				break;
			case EV_SIGNAL: {
				struct signalfd_siginfo si;

				while (read(a.sigfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						reload(&a);
						continue;
					}
					if (!a.stopping)
						pr_info("%s: draining, flushing, shipping for up to %llu s",
							strsignal((int)si.ssi_signo),
							(unsigned long long)(SHUTDOWN_SEND_NS / 1000000000u));
					a.stopping = 1;
					a.stop_deadline = now + SHUTDOWN_SEND_NS;
				}
				if (a.stopping)
					drain_stop(&a.drain);
				break;
			}
			case EV_SOCK:
				ship_event(&a.ship, evs[i].events, now);
				break;
			case EV_PROC:
				mark_gone(&a, (struct proc *)src, "exited");
				break;
			}
		}
		free_dead(&a);
		/* Stopping: the drain thread made its last pass; everything it
		 * queued is spooled (or the deadline passed: what is left in
		 * memory is still in the rings for the next agent) and sent. */
		if (a.stopping && drain_done(&a.drain) &&
		    (now >= a.stop_deadline || (!bqueue_len(&a.q) && ship_idle(&a.ship))))
			break;
	}
	drain_free(&a.drain);
	a.drain_ready = 0;
	on_queue(&a, clock_monotonic_ns());
	free_dead(&a);
	maybe_save(&a, clock_monotonic_ns(), 1);
	do_stats(&a, clock_monotonic_ns(), 0);
	pr_info("agent stopped: %" PRIu64 " processes seen, %" PRIu64 " spans spooled, %"
		PRIu64 " acknowledged, %" PRIu64 " batches (%" PRIu64 " bytes) left in the spool",
		a.procs_seen, a.spans_spooled, a.ship.spans_acked, spool_unacked(&a.spool),
		a.spool.bytes);
	ret = 0;
out:
	teardown(&a);
	return ret;
}
