// SPDX-License-Identifier: MIT
/*
 * `fay agent`: one thread, one epoll loop.  Sources:
 *   timerfd (tick)   drain every ring into the batch, flush it to the spool,
 *                    persist cursors, ship, housekeeping
 *   timerfd (retry)  files seen but not ready yet (INIT, too small)
 *   inotify          new fay-*.shm files in the shm directory
 *   pidfd per file   its process exited: final drain, count losses, remove
 *   socket           the collector (ship.c)
 *   signalfd         SIGTERM/SIGINT: drain, flush, ship for up to 2 s, exit
 * The durability protocol (spool before cursors) is described in agent.h.
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
#include "agent/ship.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/ring/ring.h"
#include "common/version.h"

#define PENDING_RETRY_NS   (10 * 1000000ull)
#define PENDING_GIVEUP_NS  (5 * 1000000000ull)
#define OWNER_CHECK_NS     (2 * 1000000000ull)
#define SHUTDOWN_SEND_NS   (2 * 1000000000ull)
#define BAD_REPORTS_MAX    10

enum ev_type { EV_TICK, EV_RETRY, EV_INOTIFY, EV_SIGNAL, EV_SOCK, EV_PROC };

struct evsrc {
	enum ev_type type;
};

/* Losses and counts of one process (also summed for the agent). */
struct proc_counts {
	uint64_t drained;       /* span records drained into batches */
	uint64_t bad;           /* records that failed to decode */
	uint64_t other;         /* records of a type the agent does not ship */
	uint64_t ring_lost;     /* overwritten before being read, or never read */
	uint64_t corrupt;       /* ring slots that made no sense */
	uint64_t died_mid_span; /* handles still open at exit */
	uint64_t too_big;       /* spans too large for a batch */
	uint64_t lost_no_handle, lost_no_ring, lost_too_big, truncated;
	uint64_t lost_nested, spans_started, spans_unsampled, bad_traceparent;
};

struct proc {
	struct evsrc ev;        /* EV_PROC, for the pidfd */
	struct proc *next;
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
	char service[64];
	dev_t dev;
	ino_t ino;
	const uint8_t *base;
	size_t size;
	const struct fay_shm_hdr *live; /* counters and state; not trusted */
	struct fay_shm_hdr snap;        /* the validated layout */
	uint64_t instance;
	uint32_t pid;
	int pidfd;
	int gone;               /* process exited: finish when possible */
	int finished;           /* on the dead list, freed after this round */
	struct ring_cons *cons;
	uint8_t *in_batch;      /* ring has records in the current batch */
	struct ep_item ep;
	char ep_key[64 + 48 + 8];
	struct proc_counts n;
	uint64_t next_owner_check;
};

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
	struct evsrc ev_tick, ev_retry, ev_ino, ev_sig, ev_sock;
	int lockfd;
	char agent_id[33];
	char cursors_path[PATH_MAX], stats_path[PATH_MAX];

	struct proc *procs;
	struct proc *dead;      /* finished this round of events */
	struct pending *pending;
	struct badfile *bad;
	int retry_armed;

	struct batch batch;
	struct cursor *trail;   /* trailer cursors of the batch being flushed */
	uint32_t trail_cap;
	struct cursor_tab cursors;
	struct spool spool;
	struct ship ship;
	uint64_t next_seq;
	int spool_blocked;      /* the last flush failed: hold the batch */

	struct proc_counts gone_n;  /* processes that are gone */
	uint64_t procs_seen, procs_gone, corrupt_files;
	uint64_t batches_spooled, spans_spooled;
	uint64_t start_ns, next_stats_ns;

	int stopping;
	uint64_t stop_deadline;

	/* Testpoint (tests only): FAY_AGENT_CRASH_AFTER_SPOOL=N kills the
	 * agent with SIGKILL right after its Nth batch reached the spool and
	 * before the cursor file is saved: the crash window the spool
	 * trailers cover. */
	long crash_after_spool;
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

static void counts_add(struct proc_counts *to, const struct proc_counts *from)
{
	const uint64_t *f = (const uint64_t *)from;
	uint64_t *t = (uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		t[i] += f[i];
}

/* The process's own counters, from its (live) header. */
static void read_hdr_counts(struct proc *p)
{
	const struct fay_shm_hdr *h = p->live;

	p->n.lost_no_handle = READ_ONCE(h->lost_no_handle);
	p->n.lost_no_ring = READ_ONCE(h->lost_no_ring);
	p->n.lost_too_big = READ_ONCE(h->lost_too_big);
	p->n.truncated = READ_ONCE(h->truncated);
	p->n.spans_started = READ_ONCE(h->spans_started);
	p->n.spans_unsampled = READ_ONCE(h->spans_unsampled);
	p->n.bad_traceparent = READ_ONCE(h->bad_traceparent);
	p->n.lost_nested = READ_ONCE(h->lost_nested);
	p->n.ring_lost = 0;
	p->n.corrupt = 0;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		p->n.ring_lost += p->cons[r].lost;
		p->n.corrupt += p->cons[r].corrupt;
	}
}

/* Refresh the LOCAL_EP item when the process changed its endpoint
 * (fay_init again).  The strings are copied bounded: a torn read gives a
 * wrong name at worst, never a bad record. */
static void refresh_ep(struct proc *p)
{
	char key[sizeof(p->ep_key)];
	const struct fay_shm_hdr *h = p->live;
	uint16_t port = READ_ONCE(h->port);

	memcpy(key, (const void *)h->service, 64);
	memcpy(key + 64, (const void *)h->ip, 48);
	memcpy(key + 112, &port, 2);
	memset(key + 114, 0, sizeof(key) - 114);
	if (!memcmp(key, p->ep_key, sizeof(key)))
		return;
	memcpy(p->ep_key, key, sizeof(key));
	key[63] = '\0';
	key[64 + 47] = '\0';
	ep_item_init(&p->ep, key, key + 64, port);
	memcpy(p->service, key, sizeof(p->service));
}

/* ---- batches and the spool ---------------------------------------------- */

/*
 * Seal the current batch, spool it with the cursors of the rings it drew
 * from, then persist the cursor file.  Returns 0 or -errno (the batch is
 * kept and retried on the next tick; draining pauses meanwhile).
 */
static int flush(struct agent *a)
{
	uint32_t ncur = 0, flen;
	uint64_t seq;
	int ret;

	if (!a->batch.count)
		return 0;
	seq = a->next_seq;
	flen = batch_seal(&a->batch, seq);
	for (struct proc *p = a->procs; p; p = p->next) {
		for (uint32_t r = 0; r < p->snap.nrings; r++) {
			if (!p->in_batch[r])
				continue;
			if (ncur == a->trail_cap) {
				uint32_t cap = a->trail_cap ? a->trail_cap * 2 : 64;
				struct cursor *v = realloc(a->trail, cap * sizeof(*v));

				if (!v)
					return -ENOMEM;
				a->trail = v;
				a->trail_cap = cap;
			}
			a->trail[ncur++] = (struct cursor){
				.instance = p->instance, .ring = r,
				.pos = p->cons[r].pos, .rec_no = p->cons[r].rec_no,
			};
		}
	}
	ret = spool_put(&a->spool, a->batch.buf, flen, a->batch.count, a->trail, ncur);
	if (ret) {
		if (!a->spool_blocked)
			pr_err("spool: cannot write batch %" PRIu64 " to %s: %s; holding it, draining paused",
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
	a->spans_spooled += a->batch.count;
	for (uint32_t i = 0; i < ncur; i++)
		cursor_tab_set(&a->cursors, &a->trail[i]);
	a->cursors.seq = seq;
	for (struct proc *p = a->procs; p; p = p->next)
		memset(p->in_batch, 0, p->snap.nrings);
	batch_reset(&a->batch);
	ret = cursor_save(a->cursors_path, &a->cursors, a->o->fsync);
	if (ret)
		pr_err("cannot write %s: %s (the spooled batch trailers still hold the cursors)",
		       a->cursors_path, errstr(ret));
	ship_pump(&a->ship, clock_monotonic_ns());
	return 0;
}

/* A NACKed batch gets the next seq (see ship.c on_nack); the cursor file
 * records it so the seq is never used again after a restart. */
static void renumber(void *ctx, struct spool_ent *e)
{
	struct agent *a = ctx;
	uint64_t old = e->seq, seq = a->next_seq;
	int ret;

	/* next_seq is given to the batch being built only when it is
	 * sealed (flush), so taking it here is safe. */
	ret = spool_renumber(&a->spool, e, seq);
	if (ret) {
		pr_err("spool: cannot renumber NACKed batch %" PRIu64 ": %s; holding it",
		       old, errstr(ret));
		if (e->seq == old)
			return;
	}
	a->next_seq = seq + 1;
	pr_info("spool: NACKed batch %" PRIu64 " will be resent as batch %" PRIu64, old, seq);
	if (seq > a->cursors.seq)
		a->cursors.seq = seq;
	ret = cursor_save(a->cursors_path, &a->cursors, a->o->fsync);
	if (ret)
		pr_err("cannot write %s: %s", a->cursors_path, errstr(ret));
}

struct drain_ctx {
	struct agent *a;
	struct proc *p;
	uint32_t ring;
};

static int on_record(void *ctx, uint16_t type, const void *payload, uint32_t len,
		     uint64_t rec_no)
{
	struct drain_ctx *d = ctx;
	struct proc *p = d->p;
	struct spanrec r;
	char err[200];
	int n, ret;

	if (unlikely(type != FAY_REC_SPAN)) {
		p->n.other++;
		return 0;
	}
	n = spanrec_decode(payload, len, &r, err, sizeof(err));
	if (unlikely(n < 0)) {
		if (p->n.bad++ < BAD_REPORTS_MAX)
			pr_warn("%s ring %u record %" PRIu64 " (slot pos %" PRIu64 "): bad span record: %s; skipped%s",
				p->name, d->ring, rec_no, p->cons[d->ring].pos, err,
				p->n.bad == BAD_REPORTS_MAX ? " (further bad records of this file are only counted)" : "");
		return 0;
	}
	ret = batch_add(&d->a->batch, payload, (uint32_t)n, &r, &p->ep);
	if (unlikely(ret == -ENOSPC))
		return ret;
	if (unlikely(ret == -E2BIG)) {
		if (p->n.too_big++ < BAD_REPORTS_MAX)
			pr_warn("%s ring %u record %" PRIu64 ": span of %d bytes is larger than a batch; dropped",
				p->name, d->ring, rec_no, n);
		return 0;
	}
	p->in_batch[d->ring] = 1;
	p->n.drained++;
	return 0;
}

/* Drain every ring of p into the batch, flushing it whenever it is full.
 * Returns 0, or -errno when the spool cannot take a batch. */
static int drain_proc(struct agent *a, struct proc *p)
{
	struct drain_ctx d = { .a = a, .p = p };

	refresh_ep(p);
	for (d.ring = 0; d.ring < p->snap.nrings; d.ring++) {
		for (;;) {
			int ret = ring_drain(&p->cons[d.ring], on_record, &d, 0);

			if (ret != -ENOSPC)
				break;
			ret = flush(a);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int drain_all(struct agent *a)
{
	if (a->spool_blocked && flush(a))
		return -EAGAIN;
	for (struct proc *p = a->procs; p; p = p->next) {
		int ret = drain_proc(a, p);

		if (ret)
			return ret;
	}
	return flush(a);
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
	if (p->cons)
		for (uint32_t r = 0; r < p->snap.nrings; r++)
			ring_cons_free(&p->cons[r]);
	free(p->cons);
	free(p->in_batch);
	if (p->base)
		munmap((void *)p->base, p->size);
	free(p);
}

static void unlink_proc(struct agent *a, struct proc *p)
{
	for (struct proc **pp = &a->procs; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			return;
		}
	}
}

/*
 * p's process is gone: last drain, count what can no longer arrive, spool
 * what was drained, forget the cursors and remove the file.  Returns 0, or
 * -EAGAIN when the spool cannot take the data yet (retried next tick).
 */
static int proc_finish(struct agent *a, struct proc *p, const char *why)
{
	char err[200];
	uint64_t lost = 0;
	int ret;

	p->gone = 1;
	if (p->pidfd >= 0) {
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
		close(p->pidfd);
		p->pidfd = -1;
	}
	ret = drain_proc(a, p);
	if (!ret)
		ret = flush(a);
	if (ret)
		return -EAGAIN;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		lost += ring_cons_finish(&p->cons[r]);
		if (p->cons[r].corrupt && p->cons[r].err[0])
			pr_warn("%s ring %u: %" PRIu64 " corrupt slots, last: %s", p->name, r,
				p->cons[r].corrupt, p->cons[r].err);
	}
	read_hdr_counts(p);
	p->n.died_mid_span = shm_pool_open_count(p->base, &p->snap);
	(void)lost;
	/* Remove the file before forgetting its cursors: killed in between,
	 * the next agent finds stale cursors (pruned) rather than the file
	 * without cursors (which it would ship again from the start). */
	if (unlink(p->path) && errno != ENOENT) {
		snprintf(err, sizeof(err), "%s", errstr(errno));
		pr_warn("cannot remove %s: %s; keeping its cursors", p->path, err);
	} else {
		cursor_tab_forget(&a->cursors, p->instance);
		ret = cursor_save(a->cursors_path, &a->cursors, a->o->fsync);
		if (ret)
			pr_err("cannot write %s: %s", a->cursors_path, errstr(ret));
	}
	pr_info("process %u (%s) gone (%s): %" PRIu64 " spans shipped to the spool; lost: "
		"%" PRIu64 " ring overwrite, %" PRIu64 " died mid-span, %" PRIu64 " no handle, %"
		PRIu64 " no ring, %" PRIu64 " too big, %" PRIu64 " bad records, %" PRIu64
		" nested; %" PRIu64 " truncated", p->pid, p->service, why, p->n.drained,
		p->n.ring_lost, p->n.died_mid_span, p->n.lost_no_handle, p->n.lost_no_ring,
		p->n.lost_too_big + p->n.too_big, p->n.bad, p->n.lost_nested, p->n.truncated);
	if (p->n.died_mid_span)
		pr_warn("process %u (%s): %" PRIu64 " spans lost: process died mid-span",
			p->pid, p->service, p->n.died_mid_span);
	counts_add(&a->gone_n, &p->n);
	a->procs_gone++;
	unlink_proc(a, p);
	/* Freed after this round of events: one may still name its pidfd. */
	p->finished = 1;
	p->next = a->dead;
	a->dead = p;
	return 0;
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

/*
 * Bind a validated file: consumers resumed from the cursors, its pidfd
 * watched.  A file whose process is gone is finished at once.
 */
static int proc_start(struct agent *a, struct proc *p)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->ev };
	const char *orphan = NULL;
	uint32_t resumed = 0;
	char rs[64] = "";
	int owner;

	p->cons = calloc(p->snap.nrings, sizeof(*p->cons));
	p->in_batch = calloc(p->snap.nrings, 1);
	if (!p->cons || !p->in_batch)
		return -ENOMEM;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		const uint8_t *rb = p->base + p->snap.rings_off + (uint64_t)r * p->snap.ring_stride;
		const struct fay_ring_ctl *ctl = (const void *)rb;
		const struct cursor *c = cursor_tab_get(&a->cursors, p->instance, r);
		uint64_t pos = c ? c->pos : 0, rec_no = c ? c->rec_no : 0;
		int ret;

		if (c && (pos > READ_ONCE(ctl->head) || rec_no > READ_ONCE(ctl->records))) {
			pr_warn("%s ring %u: saved cursor (pos %" PRIu64 ", record %" PRIu64
				") is past the ring (head %" PRIu64 ", records %" PRIu64
				"); reading it from its oldest record", p->name, r, pos, rec_no,
				(uint64_t)READ_ONCE(ctl->head), (uint64_t)READ_ONCE(ctl->records));
			pos = rec_no = 0;
		}
		resumed += pos || rec_no;
		ret = ring_cons_init(&p->cons[r], rb, p->snap.ring_slots, pos, rec_no);
		if (ret)
			return ret;
	}

	p->pidfd = (int)sys_pidfd_open((pid_t)p->pid);
	if (p->pidfd < 0) {
		if (errno != ESRCH)
			pr_warn("%s: pidfd_open(%u): %s; checking the process periodically",
				p->name, p->pid, errstr(errno));
		else
			orphan = "process not running";
	}
	if (!orphan) {
		owner = shm_pid_maps_file(p->pid, p->dev, p->ino);
		if (owner == 0)
			orphan = "pid does not map the file: exited or reused";
		else if (owner < 0)
			pr_debug("%s: cannot read /proc/%u/maps (%s): trusting the pid",
				 p->name, p->pid, errstr(owner));
	}
	if (p->pidfd >= 0 && !orphan && epoll_ctl(a->epfd, EPOLL_CTL_ADD, p->pidfd, &ev)) {
		close(p->pidfd);
		p->pidfd = -1;
	}
	p->next = a->procs;
	a->procs = p;
	a->procs_seen++;
	refresh_ep(p);
	p->next_owner_check = clock_monotonic_ns() + OWNER_CHECK_NS;
	if (resumed)
		snprintf(rs, sizeof(rs), ", %u rings resumed from saved cursors", resumed);
	pr_info("process %u (%s) seen: %s, %u rings x %u slots, %u span handles%s",
		p->pid, p->service, p->name, p->snap.nrings, p->snap.ring_slots, p->snap.npool, rs);
	if (orphan)
		proc_finish(a, p, orphan);
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

			memcpy(&h, base, sizeof(h));
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
		pr_err("shm file %s: cannot start consuming it: %s", path, errstr(ret));
		unlink_proc(a, p);
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
	uint32_t before = a->cursors.n;

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
			cursor_tab_forget(&a->cursors, inst);
			continue;
		}
		i++;
	}
	if (a->cursors.n != before)
		cursor_save(a->cursors_path, &a->cursors, a->o->fsync);
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
	for (struct proc *p = a->procs, *nx; p; p = nx) {
		nx = p->next;
		if (p->gone) {
			proc_finish(a, p, "exited");
			continue;
		}
		if (now < p->next_owner_check)
			continue;
		p->next_owner_check = now + OWNER_CHECK_NS;
		if (shm_pid_maps_file(p->pid, p->dev, p->ino) == 0)
			proc_finish(a, p, "no longer maps the file");
	}
}

/* ---- stats ------------------------------------------------------------------ */

static char *stats_json(struct agent *a, uint64_t now)
{
	struct proc_counts t = a->gone_n;
	uint64_t nrings = 0;
	json_t *j;
	char *s;

	for (struct proc *p = a->procs; p; p = p->next) {
		read_hdr_counts(p);
		counts_add(&t, &p->n);
		nrings += p->snap.nrings;
	}
	j = json_pack("{s:s, s:s, s:s, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I},"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
		      "agent_id", a->agent_id, "host", a->o->host, "version", FAY_VERSION,
		      "uptime_s", (json_int_t)((now - a->start_ns) / 1000000000u),
		      "processes", "live", (json_int_t)(a->procs_seen - a->procs_gone),
		      "seen", (json_int_t)a->procs_seen, "gone", (json_int_t)a->procs_gone,
		      "corrupt_files", (json_int_t)a->corrupt_files,
		      "rings", (json_int_t)nrings,
		      "records_drained", (json_int_t)t.drained,
		      "bad_records", (json_int_t)t.bad,
		      "other_records", (json_int_t)t.other,
		      "lost",
		      "ring_overwrite", (json_int_t)t.ring_lost,
		      "died_mid_span", (json_int_t)t.died_mid_span,
		      "no_handle", (json_int_t)t.lost_no_handle,
		      "no_ring", (json_int_t)t.lost_no_ring,
		      "too_big", (json_int_t)(t.lost_too_big + t.too_big),
		      "nested", (json_int_t)t.lost_nested,
		      "bad_record", (json_int_t)t.bad,
		      "spool_evicted", (json_int_t)a->spool.evicted_spans,
		      "collector_rejected", (json_int_t)a->ship.spans_rejected,
		      "truncated", (json_int_t)t.truncated,
		      "spans_started", (json_int_t)t.spans_started,
		      "corrupt_slots", (json_int_t)t.corrupt,
		      "spool",
		      "bytes", (json_int_t)a->spool.bytes,
		      "batches", (json_int_t)a->spool.nbatches,
		      "evicted_batches", (json_int_t)a->spool.evicted_batches,
		      "evicted_spans", (json_int_t)a->spool.evicted_spans,
		      "damaged_files", (json_int_t)a->spool.corrupt_files,
		      "shipping",
		      "batches_spooled", (json_int_t)a->batches_spooled,
		      "spans_spooled", (json_int_t)a->spans_spooled,
		      "batches_acked", (json_int_t)a->ship.batches_acked,
		      "spans_acked", (json_int_t)a->ship.spans_acked,
		      "batches_nacked", (json_int_t)a->ship.batches_nacked,
		      "connects", (json_int_t)a->ship.connects,
		      "connected", (json_int_t)(a->ship.state == SHIP_READY));
	if (!j)
		return NULL;
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
	drain_all(a);
	check_owners(a, now);
	if (a->pending)
		retry_pending(a, now);
	ship_tick(&a->ship, now);
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
	a->start_ns = clock_monotonic_ns();
	if (getenv("FAY_AGENT_CRASH_AFTER_SPOOL"))
		a->crash_after_spool = atol(getenv("FAY_AGENT_CRASH_AFTER_SPOOL"));

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
	ret = spool_open(&a->spool, path, a->o->spool_max, a->o->fsync, &a->cursors);
	if (ret) {
		pr_err("cannot open the spool %s: %s", path, errstr(ret));
		return ret;
	}
	a->next_seq = (a->cursors.seq > a->spool.max_seq ? a->cursors.seq : a->spool.max_seq) + 1;
	ret = batch_init(&a->batch, BATCH_MAX_BYTES, BATCH_MAX_SPANS);
	if (ret)
		return ret;

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

	{
		json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "agent_id", a->agent_id,
				      "host", a->o->host, "version", FAY_VERSION,
				      "token", a->o->token ? a->o->token : "");
		char *hello = j ? json_dumps(j, JSON_COMPACT) : NULL;

		json_decref(j);
		if (!hello)
			return -ENOMEM;
		ret = ship_init(&a->ship, a->o->collector, hello, strlen(hello), &a->spool,
				&a->next_seq, a->epfd, &a->ev_sock);
		free(hello);
		a->ship.renumber = renumber;
		a->ship.renumber_ctx = a;
		if (ret) {
			pr_err("bad collector address '%s' (want HOST:PORT)", a->o->collector);
			return ret;
		}
	}
	pr_info("agent %s on %s: shm %s, state %s, collector %s, %" PRIu64
		" batches (%" PRIu64 " bytes) spooled, next batch %" PRIu64,
		a->agent_id, a->o->host, a->o->shm_dir, a->o->state_dir, a->o->collector,
		a->spool.nbatches, a->spool.bytes, a->next_seq);
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
	batch_free(&a->batch);
	cursor_tab_free(&a->cursors);
	free(a->trail);
	for (int *fd = &a->epfd; fd <= &a->sigfd; fd++)
		if (*fd >= 0)
			close(*fd);
	if (a->lockfd >= 0)
		close(a->lockfd);
}

int agent_run(const struct agent_opts *o)
{
	struct agent a = { .o = o };
	struct epoll_event evs[32];
	int ret;

	ret = setup(&a);
	if (ret)
		goto out;
	/* Already-present files, then promptly on every tick. */
	scan_dir(&a, clock_monotonic_ns());
	prune_cursors(&a);
	arm_timer(a.tickfd, o->flush_ns, o->flush_ns);
	a.next_stats_ns = clock_monotonic_ns() + o->stats_ns;
	ship_tick(&a.ship, clock_monotonic_ns());

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
					if (!a.stopping)
						pr_info("%s: draining, flushing, shipping for up to %llu s",
							strsignal((int)si.ssi_signo),
							(unsigned long long)(SHUTDOWN_SEND_NS / 1000000000u));
					a.stopping = 1;
					a.stop_deadline = now + SHUTDOWN_SEND_NS;
				}
				drain_all(&a);
				break;
			}
			case EV_SOCK:
				ship_event(&a.ship, evs[i].events, now);
				break;
			case EV_PROC: {
				struct proc *p = (struct proc *)src;

				if (!p->finished)
					proc_finish(&a, p, "exited");
				break;
			}
			}
		}
		free_dead(&a);
		if (a.stopping && (now >= a.stop_deadline ||
				   (ship_idle(&a.ship) && !a.batch.count)))
			break;
	}
	drain_all(&a);
	do_stats(&a, clock_monotonic_ns(), 0);
	pr_info("agent stopped: %" PRIu64 " processes seen, %" PRIu64 " spans spooled, %"
		PRIu64 " acknowledged, %" PRIu64 " batches (%" PRIu64 " bytes) left in the spool",
		a.procs_seen, a.spans_spooled, a.ship.spans_acked, a.spool.nbatches, a.spool.bytes);
	ret = 0;
out:
	teardown(&a);
	return ret;
}
