// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's agents: each agent's row (its last committed
 * batch seq, counts, host, version, stats), cached in the store and
 * written to table agents after the data of every write that had its
 * batches, and at HELLO and STATS.
 *
 * Writers (store__writers()): the write side's shared state (this cache,
 * the names cache, the write connection st->c) is used under st->wlock.
 * A write marks its agents touched from the time it reads their seq
 * until their new row is in; a HELLO, STATS or another write of the
 * same agent waits for that (st->wcv), so an agent's row always follows
 * its writes in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "store/backend.h"
#include "store/ch_int.h"

static void agent_free(struct ch_agent *a)
{
	if (!a)
		return;
	free(a->host);
	free(a->version);
	free(a->stats);
	free(a);
}

static int dup_str(char **dst, const char *p, size_t n)
{
	char *s = strndup(p, n);

	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

int ch_agent_host(struct ch_agent *a, const char *host)
{
	return dup_str(&a->host, host, strlen(host));
}

/* The agent's row: from the cache, else from the server (a new agent
 * when it has none).  NULL + errno. */
struct ch_agent *ch_agent_get(struct store_be *st, const char *id, char *err,
				  size_t errlen)
{
	struct wbuf out = { 0 };
	struct ch_agent *a, **v;
	char sql[512];
	struct rbuf r;
	int ret;

	for (size_t i = 0; i < st->nagents; i++)
		if (!strcmp(st->agents[i]->id, id))
			return st->agents[i];
	if (!*id || strlen(id) >= sizeof(a->id) || strspn(id, "0123456789abcdefABCDEF") !=
	    strlen(id)) {
		snprintf(err, errlen, "agent id '%.40s' is not hexadecimal", id);
		return fay_err_ptr(-EINVAL);
	}
	snprintf(sql, sizeof(sql),
		 "SELECT argMax(host, ver), argMax(version, ver), argMax(last_seq, ver),"
		 " min(first_seen_us), argMax(last_seen_us, ver), argMax(batches, ver),"
		 " argMax(spans, ver), argMax(has_stats, ver), argMax(stats, ver),"
		 " argMax(stats_us, ver) FROM agents WHERE agent_id = '%s'"
		 " GROUP BY agent_id FORMAT RowBinary", id);
	ret = ch_query(st->c, sql, &out, err, errlen);
	if (ret) {
		wbuf_free(&out);
		return fay_err_ptr(ret);
	}
	/* each agent on its own: a write under way holds pointers to its
	 * agents while another adds one */
	v = realloc(st->agents, (st->nagents + 1) * sizeof(*v));
	if (v)
		st->agents = v;
	a = v ? calloc(1, sizeof(*a)) : NULL;
	if (!a) {
		wbuf_free(&out);
		return fay_err_ptr(-ENOMEM);
	}
	snprintf(a->id, sizeof(a->id), "%s", id);
	rbuf_init(&r, out.p, out.len);
	if (out.len) {
		struct zarena ar = { 0 };
		struct zs_str host, ver, stats;
		uint8_t has_stats;

		ret = ch_get_str(&r, &ar, &host);
		ret = ret ? ret : ch_get_str(&r, &ar, &ver);
		a->last_seq = rbuf_le64(&r, "last_seq");
		a->first_seen_us = rbuf_le64(&r, "first_seen_us");
		a->last_seen_us = rbuf_le64(&r, "last_seen_us");
		a->batches = rbuf_le64(&r, "batches");
		a->spans = rbuf_le64(&r, "spans");
		has_stats = rbuf_u8(&r, "has_stats");
		ret = ret ? ret : ch_get_str(&r, &ar, &stats);
		a->stats_us = rbuf_le64(&r, "stats_us");
		if (!ret && !r.err) {
			if (dup_str(&a->host, host.p, host.len) ||
			    dup_str(&a->version, ver.p, ver.len) ||
			    (has_stats && dup_str(&a->stats, stats.p, stats.len)))
				ret = -ENOMEM;
		}
		zarena_reset(&ar);
		if (r.err) {
			snprintf(err, errlen, "agents: %s", r.why);
			ret = r.err;
		}
	}
	wbuf_free(&out);
	if (ret) {
		agent_free(a);
		return fay_err_ptr(ret);
	}
	st->agents[st->nagents++] = a;
	return a;
}

static void put_cstr(struct wbuf *w, const char *s)
{
	ch_put_str(w, s ? s : "", s ? strlen(s) : 0);
}

/* The agent's row as it will be once the write under way is in. */
void ch_put_agent(struct wbuf *w, const struct ch_agent *a, uint64_t now_us)
{
	put_cstr(w, a->id);
	put_cstr(w, a->host);
	put_cstr(w, a->version);
	wbuf_le64(w, a->new_seq);
	wbuf_le64(w, a->first_seen_us ? a->first_seen_us : now_us);
	wbuf_le64(w, now_us);
	wbuf_le64(w, a->new_batches);
	wbuf_le64(w, a->new_spans);
	wbuf_u8(w, a->stats != NULL);
	put_cstr(w, a->stats);
	wbuf_le64(w, a->stats_us);
	wbuf_le64(w, now_us);
}

void ch_agent_begin(struct ch_agent *a)
{
	a->new_seq = a->last_seq;
	a->new_batches = a->batches;
	a->new_spans = a->spans;
	a->touched = 0;
}

void ch_agent_commit(struct ch_agent *a, uint64_t now_us)
{
	a->last_seq = a->new_seq;
	a->batches = a->new_batches;
	a->spans = a->new_spans;
	if (!a->first_seen_us)
		a->first_seen_us = now_us;
	a->last_seen_us = now_us;
	a->touched = 0;
}

static int agent_write(struct store_be *st, struct ch_agent *a, char *err, size_t errlen)
{
	struct wbuf w = { 0 };
	uint64_t now = clock_realtime_ns() / 1000;
	int ret;

	ch_put_agent(&w, a, now);
	ret = w.err ? w.err : ch_insert(st->c, "INSERT INTO agents (" CH_AGENT_COLS
					") FORMAT RowBinary", w.p, w.len, err, errlen);
	wbuf_free(&w);
	if (!ret)
		ch_agent_commit(a, now);
	return ret;
}

/* The agent (under st->wlock), once no write under way has it: its
 * row changes only between writes.  NULL + errno, a reason in err. */
static struct ch_agent *agent_idle(struct store_be *st, const char *id, char *err,
				   size_t errlen)
{
	struct ch_agent *a;

	while ((a = ch_agent_get(st, id, err, errlen)) && a->touched)
		pthread_cond_wait(&st->wcv, &st->wlock);
	return a;
}

static int agent_hello(struct store_be *st, const char *agent_id, const char *host,
		       const char *version, uint64_t *last_seq)
{
	char err[400];
	struct ch_agent *a = agent_idle(st, agent_id, err, sizeof(err));
	int ret;

	if (!a) {
		ret = -errno;
		pr_warn("store: clickhouse: agent %s: %s", agent_id, err);
		return ret;
	}
	if ((host && dup_str(&a->host, host, strlen(host))) ||
	    (version && dup_str(&a->version, version, strlen(version))))
		return -ENOMEM;
	ch_agent_begin(a);
	ret = agent_write(st, a, err, sizeof(err));
	if (ret) {
		pr_warn("store: clickhouse: agent %s: %s", agent_id, err);
		return ret;
	}
	*last_seq = a->last_seq;
	return 0;
}

int ch__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		    const char *version, uint64_t *last_seq)
{
	int ret;

	pthread_mutex_lock(&st->wlock);
	ret = agent_hello(st, agent_id, host, version, last_seq);
	pthread_mutex_unlock(&st->wlock);
	return ret;
}

static int agent_stats(struct store_be *st, const char *agent_id, const char *json)
{
	char err[400];
	struct ch_agent *a = agent_idle(st, agent_id, err, sizeof(err));
	int ret;

	if (!a)
		return -errno;
	if (dup_str(&a->stats, json ? json : "", json ? strlen(json) : 0))
		return -ENOMEM;
	a->stats_us = clock_realtime_ns() / 1000;
	ch_agent_begin(a);
	ret = agent_write(st, a, err, sizeof(err));
	if (ret)
		pr_warn("store: clickhouse: agent %s: stats: %s", agent_id, err);
	return ret;
}

int ch__agent_stats(struct store_be *st, const char *agent_id, const char *json)
{
	int ret;

	pthread_mutex_lock(&st->wlock);
	ret = agent_stats(st, agent_id, json);
	pthread_mutex_unlock(&st->wlock);
	return ret;
}

int ch__agent_last_seq(struct store_be *st, const char *agent_id, uint64_t *last_seq)
{
	char err[400];
	struct ch_agent *a;
	int ret = 0;

	pthread_mutex_lock(&st->wlock);
	a = agent_idle(st, agent_id, err, sizeof(err));
	if (a)
		*last_seq = a->last_seq;
	else
		ret = -errno;
	pthread_mutex_unlock(&st->wlock);
	return ret;
}

void ch_agents_wait(struct store_be *st, struct store_batch **b, size_t n)
{
	char err[400];

	for (size_t i = 0; i < n; i++) {
		struct ch_agent *a;

		if (!b[i]->agent_id)
			continue;
		a = ch_agent_get(st, b[i]->agent_id, err, sizeof(err));
		if (!a)
			return;   /* the write fails on it, saying why */
		if (a->touched) {
			pthread_cond_wait(&st->wcv, &st->wlock);
			i = (size_t)-1;   /* look at all of them again */
		}
	}
}

void ch_agents_free(struct store_be *st)
{
	for (size_t i = 0; i < st->nagents; i++)
		agent_free(st->agents[i]);
	free(st->agents);
	st->agents = NULL;
	st->nagents = 0;
}
