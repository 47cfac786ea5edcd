// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's shared standing-query definitions (store.h):
 * every collector on one database reads the same definitions from table
 * standing_queries (one row per name and change, the newest ver wins, a
 * drop is a row with deleted = 1), and one of them, the holder of the
 * lease in table standing_lease, runs them.  Each collector on it also
 * beats in table collectors (its address, lease id and hosts), so the
 * holder asks the others for their hosts' answers.
 *
 * ClickHouse 18.16 has no compare-and-set, so the lease is the newest
 * row (argMax by ver) of lease 'standing': a collector that reads it
 * free (no row, or until_us past) writes its own row and reads again.
 * Two that do so at once both write; the one whose row is newer holds
 * it, and the other sees that at its next call (it ran the queries for
 * one period meanwhile: their windows have the same keys, so the rows
 * replace each other as a retried window's do).  Times are the
 * collectors' clocks: they are expected to agree to well under a lease.
 * Statements go over the windows' connection (st->qc, under st->qlock):
 * any thread, never behind the span writers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "store/backend.h"
#include "store/ch_int.h"

#define CH_STANDING_COLS "name, query, grace_ms, created_ms, deleted, ver"
#define CH_LEASE "standing"

/* A RowBinary String as a NUL-terminated copy (NULL: bad row or no
 * memory; r->err says which). */
static char *get_str(struct rbuf *r, const char *what)
{
	uint64_t n = rbuf_uvar_max(r, r->len, what);
	const char *p = rbuf_get(r, n, what);

	return p ? strndup(p, n) : NULL;
}

/* Send b's rows with sql (an INSERT ... FORMAT RowBinary) over the
 * windows' connection, and free b.  0 or -errno (err). */
static int insert_rows(struct store_be *st, const char *sql, struct wbuf *b, char *err,
		       size_t errlen)
{
	int ret = b->err ? -ENOMEM : 0;

	if (!ret) {
		pthread_mutex_lock(&st->qlock);
		ret = ch_insert(st->qc, sql, b->p, b->len, err, errlen);
		pthread_mutex_unlock(&st->qlock);
	}
	wbuf_free(b);
	return ret;
}

int ch__standing_put(struct store_be *st, const struct store_standing *d, char *err,
		     size_t errlen)
{
	struct wbuf b = { 0 };

	ch_put_str(&b, d->name, strlen(d->name));
	ch_put_str(&b, d->query, strlen(d->query));
	wbuf_le64(&b, d->grace_ms);
	wbuf_le64(&b, d->created_ms);
	wbuf_u8(&b, d->deleted);
	wbuf_le64(&b, clock_realtime_ns() / 1000);
	return insert_rows(st, "INSERT INTO standing_queries (" CH_STANDING_COLS
			  ") FORMAT RowBinary", &b, err, errlen);
}

int ch__standing_list(struct store_be *st, int (*fn)(void *ctx, const struct store_standing *d),
		      void *ctx, char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	struct rbuf r;
	int ret;

	pthread_mutex_lock(&st->qlock);
	ret = ch_query(st->qc, "SELECT name, argMax(query, ver), argMax(grace_ms, ver),"
		       " argMax(created_ms, ver), argMax(deleted, ver) FROM standing_queries"
		       " GROUP BY name ORDER BY name FORMAT RowBinary", &out, err, errlen);
	pthread_mutex_unlock(&st->qlock);
	rbuf_init(&r, out.p, out.len);
	while (!ret && r.off < r.len) {
		char *name = get_str(&r, "name"), *query = get_str(&r, "query");
		struct store_standing d = { .name = name, .query = query };

		d.grace_ms = rbuf_le64(&r, "grace_ms");
		d.created_ms = rbuf_le64(&r, "created_ms");
		d.deleted = rbuf_u8(&r, "deleted");
		if (r.err) {
			snprintf(err, errlen, "standing_queries: %s", r.why);
			ret = r.err;
		} else if (!name || !query) {
			ret = -ENOMEM;
		} else {
			ret = fn(ctx, &d);
		}
		free(name);
		free(query);
	}
	wbuf_free(&out);
	return ret;
}

/* The lease's newest row: *holder (cut to fit), *until_us; none: "", 0. */
static int lease_read(struct store_be *st, char *holder, size_t hlen, uint64_t *until_us,
		      char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	struct rbuf r;
	char *h = NULL;
	int ret;

	*holder = '\0';
	*until_us = 0;
	pthread_mutex_lock(&st->qlock);
	ret = ch_query(st->qc, "SELECT argMax(holder, ver), argMax(until_us, ver) FROM"
		       " standing_lease WHERE lease = '" CH_LEASE "' GROUP BY lease"
		       " FORMAT RowBinary", &out, err, errlen);
	pthread_mutex_unlock(&st->qlock);
	rbuf_init(&r, out.p, out.len);
	if (!ret && out.len) {
		h = get_str(&r, "holder");
		*until_us = rbuf_le64(&r, "until_us");
		if (r.err) {
			snprintf(err, errlen, "standing_lease: %s", r.why);
			ret = r.err;
		} else if (!h) {
			ret = -ENOMEM;
		} else {
			snprintf(holder, hlen, "%s", h);
		}
	}
	free(h);
	wbuf_free(&out);
	return ret;
}

static int lease_write(struct store_be *st, const char *holder, uint64_t until_us,
		       char *err, size_t errlen)
{
	struct wbuf b = { 0 };

	ch_put_str(&b, CH_LEASE, strlen(CH_LEASE));
	ch_put_str(&b, holder, strlen(holder));
	wbuf_le64(&b, until_us);
	wbuf_le64(&b, clock_realtime_ns() / 1000);
	return insert_rows(st, "INSERT INTO standing_lease (lease, holder, until_us, ver)"
			  " FORMAT RowBinary", &b, err, errlen);
}

int ch__standing_lease(struct store_be *st, const char *holder, uint64_t lease_us,
		       bool release, char *who, size_t wholen, char *err, size_t errlen)
{
	char cur[128];
	uint64_t until, now = clock_realtime_ns() / 1000;
	int ret = lease_read(st, cur, sizeof(cur), &until, err, errlen);

	if (ret)
		return ret;
	if (release)
		return strcmp(cur, holder) ? 0 : lease_write(st, holder, 0, err, errlen);
	if (strcmp(cur, holder) && until > now) {
		if (who)
			snprintf(who, wholen, "%s", cur);
		return 0;               /* another's, still running */
	}
	ret = lease_write(st, holder, now + lease_us, err, errlen);
	if (!ret && strcmp(cur, holder))   /* taken: did another take it too? */
		ret = lease_read(st, cur, sizeof(cur), &until, err, errlen);
	if (ret)
		return ret;
	if (who)
		snprintf(who, wholen, "%s", cur);
	return !strcmp(cur, holder);
}

#define CH_COLLECTOR_COLS "id, run, hosts, beat_us, gone, ver"

int ch__collector_beat(struct store_be *st, const struct store_collector *c, char *err,
		       size_t errlen)
{
	struct wbuf b = { 0 };

	ch_put_str(&b, c->id, strlen(c->id));
	ch_put_str(&b, c->run, strlen(c->run));
	ch_put_str(&b, c->hosts, strlen(c->hosts));
	wbuf_le64(&b, c->beat_us);
	wbuf_u8(&b, c->gone);
	wbuf_le64(&b, clock_realtime_ns() / 1000);
	return insert_rows(st, "INSERT INTO collectors (" CH_COLLECTOR_COLS ") FORMAT RowBinary",
			   &b, err, errlen);
}

int ch__collectors(struct store_be *st, int (*fn)(void *ctx, const struct store_collector *c),
		   void *ctx, char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	struct rbuf r;
	int ret;

	pthread_mutex_lock(&st->qlock);
	ret = ch_query(st->qc, "SELECT id, argMax(run, ver), argMax(hosts, ver),"
		       " argMax(beat_us, ver), argMax(gone, ver) FROM collectors"
		       " GROUP BY id ORDER BY id FORMAT RowBinary", &out, err, errlen);
	pthread_mutex_unlock(&st->qlock);
	rbuf_init(&r, out.p, out.len);
	while (!ret && r.off < r.len) {
		char *id = get_str(&r, "id"), *run = get_str(&r, "run");
		char *hosts = get_str(&r, "hosts");
		struct store_collector c = { .id = id, .run = run, .hosts = hosts };

		c.beat_us = rbuf_le64(&r, "beat_us");
		c.gone = rbuf_u8(&r, "gone");
		if (r.err) {
			snprintf(err, errlen, "collectors: %s", r.why);
			ret = r.err;
		} else if (!id || !run || !hosts) {
			ret = -ENOMEM;
		} else {
			ret = fn(ctx, &c);
		}
		free(id);
		free(run);
		free(hosts);
	}
	wbuf_free(&out);
	return ret;
}
