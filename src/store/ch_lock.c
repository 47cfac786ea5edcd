// SPDX-License-Identifier: MIT
/*
 * The migration lock of a ClickHouse database: collectors started at
 * once on a database that needs a migration (ch_schema.c) run it one at
 * a time.  ClickHouse 18.16 has no locks and no transactions; what it has
 * is a CREATE TABLE without IF NOT EXISTS that succeeds in exactly one
 * client (the server's DDL guard on the name): the others get
 * TABLE_ALREADY_EXISTS (code 57).  So:
 *
 *   the lock     table DB.fay_migrate_lock_G (Log), made by CREATE
 *                TABLE ... AS SELECT with one row: who holds it (host,
 *                pid, the process's start time, boot id and pid
 *                namespace), since when, and the prefix of its query ids
 *                (ch_conn_query_id(): system.processes shows them while
 *                they run).  Released by DROP.
 *   generations  G counts from 1.  The lock is the table of the highest
 *                G; breaking a dead holder's lock G is taking G + 1 (so
 *                two collectors breaking the same dead lock cannot both
 *                win: the CREATE decides again), then dropping the lower
 *                ones.  A holder checks at each point of its migration
 *                (ch_lock_point()) that its table is still there with its
 *                row (a later holder may have taken the name again); if
 *                not, it was judged dead (stopped, cut off): it stops and
 *                waits like the others.
 *   waiting      a collector that finds the lock taken polls (200 ms),
 *                saying what it waits for (first, then every 10 s).  A
 *                holder is dead when it ran on this machine (same boot
 *                id and pid namespace) and its pid is gone or is another
 *                process (start time); or, elsewhere (or where /proc did
 *                not say who it is), when the waiter has seen no query
 *                of it in system.processes for
 *                FAY_CH_MIGRATE_STALE_S seconds (60 unless set: a holder
 *                only runs statements, one after the other, the copy of
 *                a big table visible all along).  A lock with no row yet
 *                (its CREATE ... AS SELECT under way, or the server died
 *                in it) is dead after that bound too.  Breaking is
 *                logged with the reason.
 *
 * Whoever takes the lock reads the schema's version again before doing
 * anything: the previous holder may have finished the migration.  A
 * holder killed mid-migration leaves its step half done; every step is
 * written to be run again from any point (ch_schema.c), so the next
 * holder finishes it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/procstat.h"
#include "store/ch_int.h"

#define LOCK_NAME "fay_migrate_lock_"
#define POLL_NS 200000000ull
#define SAY_NS (10 * 1000000000ull)
#define MAX_GENS 64

/* The ClickHouse error code in a reason ch_query() wrote ("Code: 57,"),
 * or 0. */
static int ch_code(const char *err)
{
	const char *p = strstr(err, "Code: ");

	return p ? atoi(p + 6) : 0;
}

/* s with every byte but letters, digits and keep replaced by '-' (safe
 * in an SQL string and, with keep "-.", in a LIKE pattern). */
static void tame(char *s, const char *keep)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr(keep, *s)))
			*s = '-';
}

/* The first line of file fn into buf ("" when unreadable). */
static void read_line(const char *fn, char *buf, size_t len)
{
	FILE *f = fopen(fn, "re");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* Who this process is, as a holder. */
static void whoami(struct ch_holder *h)
{
	char host[64] = "";
	ssize_t n;

	memset(h, 0, sizeof(*h));
	if (gethostname(host, sizeof(host) - 1))
		snprintf(host, sizeof(host), "unknown");
	tame(host, "-._");
	h->pid = (unsigned)getpid();
	if (proc_start_ticks(0, &h->start))
		h->start = 0;
	snprintf(h->holder, sizeof(h->holder), "%s pid %u", host, h->pid);
	read_line("/proc/sys/kernel/random/boot_id", h->boot_id, sizeof(h->boot_id));
	tame(h->boot_id, "-");
	n = readlink("/proc/self/ns/pid", h->pidns, sizeof(h->pidns) - 1);
	h->pidns[n > 0 ? n : 0] = '\0';
	tame(h->pidns, ":[]");
	tame(host, "-.");
	snprintf(h->qid, sizeof(h->qid), "fay-migrate-%s-%u-%llu", host, h->pid, h->start);
}

/* The generations of the lock tables there are, into gens (*n of them,
 * up to MAX_GENS), and the highest into *top (0: none). */
static int lock_gens(struct ch_lock *lk, unsigned *gens, size_t *n, unsigned *top,
		     char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[512];
	int ret;

	snprintf(sql, sizeof(sql), "SELECT name FROM system.tables WHERE database = '%s'"
		 " AND match(name, '^" LOCK_NAME "[0-9]+$')", lk->w->db);
	ret = ch_query(lk->c, sql, &out, err, errlen);
	*n = 0;
	*top = 0;
	for (size_t i = 0; !ret && i < out.len; ) {
		const char *l = (const char *)out.p + i, *nl = memchr(l, '\n', out.len - i);
		unsigned g = (unsigned)strtoul(l + strlen(LOCK_NAME), NULL, 10);

		if (*n < MAX_GENS)
			gens[(*n)++] = g;
		if (g > *top)
			*top = g;
		i = nl ? (size_t)(nl - (const char *)out.p) + 1 : out.len;
	}
	wbuf_free(&out);
	return ret;
}

/* Whether lock gen is there: 1, 0 or -errno. */
static int lock_there(struct ch_lock *lk, unsigned gen, char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[512];
	int ret;

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.tables WHERE database = '%s'"
		 " AND name = '" LOCK_NAME "%u'", lk->w->db, gen);
	ret = ch_query(lk->c, sql, &out, err, errlen);
	if (!ret)
		ret = out.len && out.p[0] != '0';
	wbuf_free(&out);
	return ret;
}

/*
 * The holder of lock gen into *h: 0, 1 when it has no row to read (being
 * written, or unreadable: then it is judged as a lock without a row),
 * -ENOENT when it is gone (a read that fails as the table is dropped,
 * "File not found" or UNKNOWN_TABLE), else -errno with a reason in err.
 */
static int read_holder(struct ch_lock *lk, unsigned gen, struct ch_holder *h, char *err,
		       size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[512];
	int ret;

	memset(h, 0, sizeof(*h));
	snprintf(sql, sizeof(sql), "SELECT holder, boot_id, pidns, pid, start, qid FROM"
		 " %s." LOCK_NAME "%u LIMIT 1", lk->w->db, gen);
	ret = ch_query(lk->c, sql, &out, err, errlen);
	if (ret == -EIO) {
		pr_debug("store: clickhouse: reading " LOCK_NAME "%u: %s", gen, err);
		ret = lock_there(lk, gen, err, errlen);
		if (ret >= 0)
			ret = ret ? 1 : -ENOENT;
		wbuf_free(&out);
		return ret;
	}
	wbuf_u8(&out, 0);
	if (!ret && out.err)
		ret = -ENOMEM;
	if (!ret && !out.p[0])
		ret = 1;
	if (!ret) {
		char *f[6], *p = (char *)out.p;
		int i = 0;

		p[strcspn(p, "\n")] = '\0';
		while (p && i < 6)
			f[i++] = strsep(&p, "\t");
		if (i < 6) {   /* not a row of ours */
			snprintf(h->holder, sizeof(h->holder), "%s", f[0]);
			ret = 1;
		} else {
			snprintf(h->holder, sizeof(h->holder), "%s", f[0]);
			snprintf(h->boot_id, sizeof(h->boot_id), "%s", f[1]);
			snprintf(h->pidns, sizeof(h->pidns), "%s", f[2]);
			h->pid = (unsigned)strtoul(f[3], NULL, 10);
			h->start = strtoull(f[4], NULL, 10);
			snprintf(h->qid, sizeof(h->qid), "%s", f[5]);
		}
	}
	wbuf_free(&out);
	return ret;
}

/* Whether a query of the holder h runs on the node: 1, 0 or -errno. */
static int holder_runs(struct ch_lock *lk, const struct ch_holder *h, char *err,
		       size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[512];
	int ret;

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.processes WHERE query_id"
		 " LIKE '%s-%%'", h->qid);
	ret = ch_query(lk->c, sql, &out, err, errlen);
	if (!ret)
		ret = out.len && out.p[0] != '0';
	wbuf_free(&out);
	return ret;
}

/* Take lock gen: 0, -EEXIST when another has it, else -errno. */
static int create_lock(struct ch_lock *lk, unsigned gen, char *err, size_t errlen)
{
	const struct ch_holder *m = &lk->me;
	char sql[1024];
	int ret;

	snprintf(sql, sizeof(sql), "CREATE TABLE %s." LOCK_NAME "%u ENGINE = Log AS"
		 " SELECT '%s' AS holder, '%s' AS boot_id, '%s' AS pidns, toUInt32(%u) AS pid,"
		 " toUInt64(%llu) AS start, toUInt64(now()) * 1000000 AS since_us,"
		 " '%s' AS qid", lk->w->db, gen, m->holder, m->boot_id, m->pidns, m->pid,
		 m->start, m->qid);
	ret = ch_query(lk->c, sql, NULL, err, errlen);
	if (ret && ch_code(err) == 57)   /* TABLE_ALREADY_EXISTS */
		return -EEXIST;
	if (!ret)
		lk->gen = gen;
	return ret;
}

static int drop_lock(struct ch_lock *lk, unsigned gen, char *err, size_t errlen)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s." LOCK_NAME "%u", lk->w->db, gen);
	return ch_query(lk->c, sql, NULL, err, errlen);
}

/* The seconds of FAY_CH_MIGRATE_STALE_S (1 to a day), else 60. */
static unsigned stale_s(void)
{
	const char *s = getenv("FAY_CH_MIGRATE_STALE_S");
	char *end;
	unsigned long v = s ? strtoul(s, &end, 10) : 0;

	if (s && (end == s || *end || !v || v > 86400)) {
		pr_warn("store: clickhouse: FAY_CH_MIGRATE_STALE_S='%s' is not 1 to 86400"
			" seconds: 60 used", s);
		v = 0;
	}
	return v ? (unsigned)v : 60;
}

/*
 * Why the holder h of the lock (first seen at *seen_ns, which a sign of
 * life moves to now) is dead, into why; 0 when it is not (or not yet:
 * see the head comment), 1 when it is, -errno.
 */
static int dead(struct ch_lock *lk, const struct ch_holder *h, int norow, uint64_t now,
		uint64_t *seen_ns, char *why, size_t whylen, char *err, size_t errlen)
{
	unsigned long long start;
	uint64_t bound = lk->stale_s * 1000000000ull;
	int ret;

	if (!norow && h->boot_id[0] && h->pidns[0] && h->start &&
	    !strcmp(h->boot_id, lk->me.boot_id) && !strcmp(h->pidns, lk->me.pidns)) {
		if (!proc_start_ticks((pid_t)h->pid, &start) && start == h->start)
			return 0;
		snprintf(why, whylen, "its process is gone");
		return 1;
	}
	if (!norow) {
		ret = holder_runs(lk, h, err, errlen);
		if (ret < 0)
			return ret;
		if (ret)
			*seen_ns = now;
	}
	if (now - *seen_ns < bound)
		return 0;
	snprintf(why, whylen, norow ? "no holder written in it for %u s" :
		 "no query of it for %u s", lk->stale_s);
	return 1;
}

int ch_lock_take(struct ch_lock *lk, struct ch_conn *c, const struct ch_where *w,
		 char *err, size_t errlen)
{
	uint64_t t0 = clock_monotonic_ns(), seen_ns = 0, said_ns = 0;
	unsigned gens[MAX_GENS], seen = 0;
	char seen_qid[sizeof(lk->me.qid)] = "";
	int ret;

	memset(lk, 0, sizeof(*lk));
	lk->c = c;
	lk->w = w;
	whoami(&lk->me);
	lk->stale_s = stale_s();
	ret = ch_conn_query_id(c, lk->me.qid);
	while (!ret) {
		struct ch_holder h;
		struct timespec ts = { 0, POLL_NS };
		char why[96];
		uint64_t now;
		unsigned top;
		size_t n;

		ret = lock_gens(lk, gens, &n, &top, err, errlen);
		if (ret)
			break;
		if (!top) {
			ret = create_lock(lk, 1, err, errlen);
			if (ret == -EEXIST)
				ret = 0;
			else
				break;
			continue;
		}
		ret = read_holder(lk, top, &h, err, errlen);
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (ret < 0)
			break;
		now = clock_monotonic_ns();
		if (top != seen || strcmp(h.qid, seen_qid)) {  /* another lock */
			seen = top;
			snprintf(seen_qid, sizeof(seen_qid), "%s", h.qid);
			seen_ns = now;
		}
		ret = dead(lk, &h, ret == 1, now, &seen_ns, why, sizeof(why), err, errlen);
		if (ret < 0)
			break;
		if (ret) {
			pr_warn("store: clickhouse: database %s: breaking the migration lock"
				" " LOCK_NAME "%u of %s: %s", w->db, top, h.holder, why);
			ret = create_lock(lk, top + 1, err, errlen);
			if (ret == -EEXIST) {
				ret = 0;
				continue;
			}
			for (size_t i = 0; !ret && i < n; i++)
				ret = gens[i] < lk->gen ? drop_lock(lk, gens[i], err, errlen) : 0;
			break;
		}
		if (!said_ns || now - said_ns >= SAY_NS) {
			pr_info("store: clickhouse: database %s: waiting for the migration lock"
				" " LOCK_NAME "%u of %s (waited %llu s)", w->db, top, h.holder,
				(unsigned long long)((now - t0) / 1000000000u));
			said_ns = now;
		}
		nanosleep(&ts, NULL);
	}
	if (ret && lk->gen)
		ch_lock_give(lk);
	if (!ret)
		pr_info("store: clickhouse: database %s: migration lock " LOCK_NAME "%u taken"
			" by %s", w->db, lk->gen, lk->me.holder);
	return ret;
}

int ch_lock_point(struct ch_lock *lk, const char *point, char *err, size_t errlen)
{
	const char *kill_at = getenv("FAY_CH_TEST_MIGRATE_KILL");
	const char *stop_at = getenv("FAY_CH_TEST_MIGRATE_STOP");
	struct ch_holder h;
	int ret;

	if (kill_at && !strcmp(kill_at, point)) {
		pr_warn("store: clickhouse: test point FAY_CH_TEST_MIGRATE_KILL: killed at"
			" '%s' of the migration of database %s", point, lk->w->db);
		raise(SIGKILL);
	}
	if (stop_at && !strcmp(stop_at, point)) {
		pr_warn("store: clickhouse: test point FAY_CH_TEST_MIGRATE_STOP: stopped at"
			" '%s' of the migration of database %s", point, lk->w->db);
		raise(SIGSTOP);
	}
	/* ours is still there with our row: a breaker drops it, and a lock
	 * taken after the breaker's may have its name, not its row */
	ret = read_holder(lk, lk->gen, &h, err, errlen);
	if (ret == -ENOENT || ret == 1 || (!ret && strcmp(h.qid, lk->me.qid))) {
		snprintf(err, errlen, "database %s: the migration lock " LOCK_NAME "%u is no"
			 " longer ours at '%s' (another collector judged us dead and broke"
			 " it): stopped there, waiting for the lock again", lk->w->db, lk->gen,
			 point);
		lk->gen = 0;
		return -EBUSY;
	}
	return ret;
}

void ch_lock_give(struct ch_lock *lk)
{
	char err[256];

	if (!lk->gen)
		return;
	if (drop_lock(lk, lk->gen, err, sizeof(err)))
		pr_warn("store: clickhouse: database %s: releasing the migration lock"
			" " LOCK_NAME "%u: %s (the next collector breaks it)", lk->w->db,
			lk->gen, err);
	lk->gen = 0;
}
