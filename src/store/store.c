// SPDX-License-Identifier: MIT
/*
 * store.h over the backends (store/backend.h): store__open() picks one by
 * the form of its argument and every other call goes through its ops.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "store/backend.h"
#include "store/store.h"

#define CH_PREFIX "clickhouse:"

struct store {
	const struct store_ops *ops;
	struct store_be *be;
	char *path;
	struct store_dw dw;       /* the disk watermark (store/disk.c) */
};

struct store_reader {
	const struct store_ops *ops;
	struct store_rd *rd;
};

static const struct store_ops *backend_of(const char **where)
{
	if (!strncmp(*where, CH_PREFIX, strlen(CH_PREFIX))) {
		*where += strlen(CH_PREFIX);
		return &ch_store_ops;
	}
	return &sq_store_ops;
}

struct store *store__open(const char *path, unsigned flags, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));
	const char *where = path;

	if (!st || !(st->path = strdup(path))) {
		free(st);
		snprintf(err, errlen, "%s: out of memory", path);
		return fay_err_ptr(-ENOMEM);
	}
	st->ops = backend_of(&where);
	st->be = st->ops->open(where, flags, err, errlen);
	if (!st->be) {
		int e = errno;

		free(st->path);
		free(st);
		errno = e;
		return NULL;
	}
	store_dw_init(&st->dw);
	return st;
}

void store__close(struct store *st)
{
	if (!st)
		return;
	st->ops->close(st->be);
	store_dw_free(&st->dw);
	free(st->path);
	free(st);
}

const char *store__path(const struct store *st)
{
	return st->path;
}

const char *store__backend(const struct store *st)
{
	return st->ops->name;
}

int store__schema_version(void)
{
	return sq_store_ops.schema_version;
}

int store__backend_schema_version(const struct store *st)
{
	return st->ops->schema_version;
}

int store__write(struct store *st, struct store_batch **b, size_t n,
		 char *err, size_t errlen)
{
	int ret = st->ops->write(st->be, b, n, err, errlen);
	uint64_t spans = 0;

	for (size_t i = 0; i < n; i++)
		spans += b[i]->nspans + b[i]->nparts;
	store_dw_wrote(&st->dw, st->ops, ret, err, spans * STORE_SPAN_DISK);
	return ret;
}

int store__prepare(struct store *st, struct store_batch *b, struct zarena *a)
{
	b->prep = NULL;
	return st->ops->prepare ? st->ops->prepare(st->be, b, a) : 0;
}

void store__set_min_free(struct store *st, uint64_t bytes, unsigned pct)
{
	pthread_mutex_lock(&st->dw.lock);
	st->dw.min_bytes = bytes;
	st->dw.min_pct = pct;
	st->dw.checked_ns = 0;
	pthread_mutex_unlock(&st->dw.lock);
}

int store__write_gate(struct store *st, char *err, size_t errlen)
{
	return store_dw_gate(&st->dw, st->ops, st->be, err, errlen);
}

void store__disk(struct store *st, struct store_disk *d)
{
	store_dw_get(&st->dw, st->ops, st->be, d);
}

uint64_t store__write_room(struct store *st)
{
	return store_dw_room(&st->dw, st->ops);
}

unsigned store__writers(const struct store *st)
{
	return st->ops->writers ? st->ops->writers : 1;
}

int store__agent_hello(struct store *st, const char *agent_id, const char *host,
		       const char *version, uint64_t *last_seq)
{
	return st->ops->agent_hello(st->be, agent_id, host, version, last_seq);
}

int store__agent_stats(struct store *st, const char *agent_id, const char *json)
{
	return st->ops->agent_stats(st->be, agent_id, json);
}

int store__agent_last_seq(struct store *st, const char *agent_id, uint64_t *last_seq)
{
	return st->ops->agent_last_seq(st->be, agent_id, last_seq);
}

int store__retain(struct store *st, uint64_t before_us, unsigned chunk)
{
	return st->ops->retain(st->be, before_us, chunk);
}

int store__put_windows(struct store *st, const struct store_window *w, size_t n,
		       char *err, size_t errlen)
{
	return st->ops->put_windows(st->be, w, n, err, errlen);
}

bool store__standing_shared(const struct store *st)
{
	return st->ops->standing_list != NULL;
}

int store__standing_put(struct store *st, const struct store_standing *d, char *err,
			size_t errlen)
{
	return st->ops->standing_put ? st->ops->standing_put(st->be, d, err, errlen) :
	       -EOPNOTSUPP;
}

int store__standing_list(struct store *st, int (*fn)(void *ctx, const struct store_standing *d),
			 void *ctx, char *err, size_t errlen)
{
	return st->ops->standing_list ? st->ops->standing_list(st->be, fn, ctx, err, errlen) :
	       -EOPNOTSUPP;
}

int store__standing_lease(struct store *st, const char *holder, uint64_t lease_us,
			  bool release, char *who, size_t wholen, char *err, size_t errlen)
{
	return st->ops->standing_lease ?
	       st->ops->standing_lease(st->be, holder, lease_us, release, who, wholen, err,
				       errlen) : -EOPNOTSUPP;
}

int store__collector_beat(struct store *st, const struct store_collector *c, char *err,
			  size_t errlen)
{
	return st->ops->collector_beat ? st->ops->collector_beat(st->be, c, err, errlen) :
	       -EOPNOTSUPP;
}

int store__collectors(struct store *st, int (*fn)(void *ctx, const struct store_collector *c),
		      void *ctx, char *err, size_t errlen)
{
	return st->ops->collectors ? st->ops->collectors(st->be, fn, ctx, err, errlen) :
	       -EOPNOTSUPP;
}

int store__health(struct store *st, char *err, size_t errlen)
{
	if (!st->ops->health)
		return 0;
	return st->ops->health(st->be, err, errlen);
}

int store__set_retention(struct store *st, uint64_t retention_us, char *err,
			 size_t errlen)
{
	if (!st->ops->set_retention)
		return 0;
	return st->ops->set_retention(st->be, retention_us, err, errlen);
}

int store__set_autocomplete_keys(struct store *st, const char *const *keys, size_t n)
{
	if (!st->ops->set_autocomplete_keys)
		return 0;
	return st->ops->set_autocomplete_keys(st->be, keys, n);
}

/* ---- reading ------------------------------------------------------------ */

struct store_reader *store__reader_new(struct store *st)
{
	struct store_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return fay_err_ptr(-ENOMEM);
	r->ops = st->ops;
	r->rd = st->ops->reader_new(st->be);
	if (!r->rd) {
		int e = errno;

		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

void store__reader_free(struct store_reader *r)
{
	if (!r)
		return;
	r->ops->reader_free(r->rd);
	free(r);
}

void store_names_free(struct store_names *n)
{
	if (!n)
		return;
	zarena_reset(&n->arena);
	n->v = NULL;
	n->n = 0;
}

void store_traces_free(struct store_traces *t)
{
	if (!t)
		return;
	zarena_reset(&t->arena);
	t->v = NULL;
	t->n = t->cap = 0;
}

int store__services(struct store_reader *r, struct store_names *out)
{
	return r->ops->services(r->rd, out);
}

int store__span_names(struct store_reader *r, const char *service,
		      struct store_names *out)
{
	return r->ops->span_names(r->rd, service, out);
}

int store__remote_services(struct store_reader *r, const char *service,
			   struct store_names *out)
{
	return r->ops->remote_services(r->rd, service, out);
}

int store__autocomplete_values(struct store_reader *r, const char *key,
			       struct store_names *out)
{
	if (!r->ops->autocomplete_values)
		return 0;
	return r->ops->autocomplete_values(r->rd, key, out);
}

int store__trace(struct store_reader *r, uint64_t hi, uint64_t lo,
		 struct store_traces *out)
{
	return r->ops->trace(r->rd, hi, lo, out);
}

int store__traces(struct store_reader *r, const struct store_query *q,
		  struct store_traces *out)
{
	return r->ops->traces(r->rd, q, out);
}

int store__counts(struct store_reader *r, struct store_counts *c)
{
	return r->ops->counts(r->rd, c);
}

int store__scan(struct store_reader *r, uint64_t from_us, uint64_t to_us,
		int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	return r->ops->scan(r->rd, from_us, to_us, fn, ctx);
}

int store__scan_traces(struct store_reader *r, uint64_t from_us, uint64_t to_us,
		       int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	if (!r->ops->scan_traces)
		return r->ops->scan(r->rd, from_us, to_us + 1, fn, ctx);
	return r->ops->scan_traces(r->rd, from_us, to_us, fn, ctx);
}

const struct store_ops *store_reader_ops(const struct store_reader *r)
{
	return r->ops;
}

int store__sql(struct store_reader *r, const char *sql, const struct store_sql_cb *cb,
	       char *err, size_t errlen)
{
	if (!r->ops->sql) {
		snprintf(err, errlen, "this store has no SQL");
		return -ENOTSUP;
	}
	return r->ops->sql(r->rd, sql, cb, err, errlen);
}

int store__agents(struct store_reader *r,
		  int (*fn)(void *ctx, const struct store_agent *a), void *ctx)
{
	return r->ops->agents(r->rd, fn, ctx);
}
