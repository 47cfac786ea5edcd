// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store: opening (the URL, the schema) and the write path.
 * The schema and its reasons are in store/ch_schema.c.
 *
 * "clickhouse:" URL[,URL...][#CLUSTER]
 *   URL is a server's HTTP interface, http://host:port[/database]
 *   (database "fay" when absent).  With #CLUSTER, the tables are local
 *   tables on every shard of that cluster (remote_servers) under
 *   Distributed tables; the schema is created on every URL listed (one a
 *   shard: ClickHouse 18.16 has no ON CLUSTER without ZooKeeper) and the
 *   store reads and writes through the first.
 *
 * Write path: store__write() turns every batch into RowBinary rows and
 * sends each table's rows in ONE INSERT (ClickHouse makes one part per
 * partition, i.e. per day, an insert touches: a group of batches is a
 * few parts, never a part per span or per batch: TOO_MANY_PARTS is kept
 * away by the collector's group commit).  Parts go first; then every span
 * id they touched is merged from all its parts, read back, into spans
 * (origin 1, replacing the previous merge by key).  An agent's last seq
 * goes last, after every row was accepted: a failure in between leaves
 * rows that the resent batch writes again under the same keys (see
 * ch_schema.c), so nothing shows twice and nothing acknowledged is lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/rand.h"
#include "store/backend.h"
#include "store/ch_int.h"
#include <stdarg.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

uint64_t ch_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

/* ---- opening ------------------------------------------------------------ */

static int valid_ident(const char *s, size_t n)
{
	if (!n || n >= 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* Split "URL[,URL...][#CLUSTER]" into st's urls (each without a path),
 * db and cluster. */
static int parse_where(struct store_be *st, const char *where, char *err, size_t errlen)
{
	char *s = strdup(where), *hash, *tok, *save = NULL;
	int ret = 0;

	if (!s)
		return -ENOMEM;
	snprintf(st->db, sizeof(st->db), "fay");
	hash = strchr(s, '#');
	if (hash) {
		*hash++ = '\0';
		if (!valid_ident(hash, strlen(hash))) {
			set_err(err, errlen, "clickhouse:%s: cluster name '%s': letters,"
				" digits and _ only", where, hash);
			ret = -EINVAL;
			goto out;
		}
		st->cluster = strdup(hash);
	}
	for (tok = strtok_r(s, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		char *host, *path, **v;

		if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)) {
			set_err(err, errlen, "clickhouse:%s: '%s' is not an http:// URL"
				" of a ClickHouse server's HTTP interface", where, tok);
			ret = -EINVAL;
			break;
		}
		host = strstr(tok, "//") + 2;
		path = strchr(host, '/');
		if (path) {
			*path++ = '\0';
			path[strcspn(path, "/?")] = '\0';
			if (*path && !valid_ident(path, strlen(path))) {
				set_err(err, errlen, "clickhouse:%s: database '%s': letters,"
					" digits and _ only", where, path);
				ret = -EINVAL;
				break;
			}
			if (*path)
				snprintf(st->db, sizeof(st->db), "%s", path);
		}
		if (!*host) {
			set_err(err, errlen, "clickhouse:%s: no host in '%s'", where, tok);
			ret = -EINVAL;
			break;
		}
		v = realloc(st->urls, (st->nurls + 1) * sizeof(*v));
		if (!v || !(v[st->nurls] = strdup(tok))) {
			if (v)
				st->urls = v;
			ret = -ENOMEM;
			break;
		}
		st->urls = v;
		st->nurls++;
	}
	if (!ret && !st->nurls) {
		set_err(err, errlen, "clickhouse:%s: no URL", where);
		ret = -EINVAL;
	}
out:
	free(s);
	return ret;
}

struct store_be *ch__open(const char *where, unsigned flags, char *err, size_t errlen)
{
	struct store_be *st = calloc(1, sizeof(*st));
	char why[400];
	int ret = -ENOMEM, ok = 1;
	unsigned wflags;

	if (!st || !(st->url = strdup(where))) {
		set_err(err, errlen, "clickhouse:%s: out of memory", where);
		free(st);
		return fay_err_ptr(-ENOMEM);
	}
	pthread_mutex_init(&st->hlock, NULL);
	pthread_mutex_init(&st->qlock, NULL);
	pthread_mutex_init(&st->wlock, NULL);
	pthread_cond_init(&st->wcv, NULL);
	st->flags = flags;
	if (getenv("FAY_CH_TEST_KILL_FILE") && *getenv("FAY_CH_TEST_KILL_FILE") &&
	    !(st->test_kill_file = strdup(getenv("FAY_CH_TEST_KILL_FILE")))) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = parse_where(st, where, err, errlen);
	if (ret)
		goto fail;
	st->w.db = st->db;
	st->w.cluster = st->cluster;
	wflags = (flags & STORE_F_READONLY ? CH_READONLY : 0) |
		 (st->cluster ? CH_SYNC_INSERT : 0);
	st->c = ch_conn_new(st->urls[0], st->db, wflags, why, sizeof(why));
	/* (a connection connects at its first request: idle slots cost none) */
	for (size_t i = 0; st->c && ok && i < CH_WRITERS * CH_PAR; i++)
		ok = (st->slot[i / CH_PAR].c[i % CH_PAR] =
		      ch_conn_new(st->urls[0], st->db, wflags, why, sizeof(why))) != NULL;
	st->hc = st->c && ok ? ch_conn_new(st->urls[0], st->db, 0, why, sizeof(why)) : NULL;
	st->qc = st->hc ? ch_conn_new(st->urls[0], st->db, wflags, why, sizeof(why)) : NULL;
	if (!st->qc) {
		ret = -errno;
		set_err(err, errlen, "clickhouse:%s: %s", where, why);
		goto fail;
	}
	ch_conn_timeout(st->hc, 2000);
	if (!(flags & STORE_F_READONLY)) {
		for (size_t i = 0; i < st->nurls; i++) {
			/* the database may not be there yet: names are qualified */
			struct ch_conn *c = ch_conn_new(st->urls[i], "default", 0, why,
							sizeof(why));

			ret = c ? ch_schema_apply(c, &st->w, why, sizeof(why)) : -errno;
			ch_conn_free(c);
			if (ret) {
				set_err(err, errlen, "clickhouse:%s: %s: schema: %s", where,
					st->urls[i], why);
				goto fail;
			}
		}
	}
	return st;
fail:
	ch__close(st);
	return fay_err_ptr(ret);
}

void ch__close(struct store_be *st)
{
	if (!st)
		return;
	ch_conn_free(st->c);
	for (size_t i = 0; i < CH_WRITERS; i++) {
		for (size_t j = 0; j < CH_PAR; j++)
			ch_conn_free(st->slot[i].c[j]);
		for (size_t j = 0; j < ARRAY_SIZE(st->slot[i].keep); j++)
			wbuf_free(&st->slot[i].keep[j]);
	}
	ch_conn_free(st->hc);
	ch_conn_free(st->qc);
	for (size_t i = 0; i < st->nurls; i++)
		free(st->urls[i]);
	ch_agents_free(st);
	free(st->ac_keys);
	free(st->urls);
	free(st->cluster);
	free(st->url);
	free(st->test_kill_file);
	zarena_reset(&st->merge_arena);
	pthread_mutex_destroy(&st->hlock);
	pthread_mutex_destroy(&st->qlock);
	pthread_mutex_destroy(&st->wlock);
	pthread_cond_destroy(&st->wcv);
	free(st);
}



int ch__health(struct store_be *st, char *err, size_t errlen)
{
	uint64_t now = clock_monotonic_ns() / 1000;
	int ret;

	pthread_mutex_lock(&st->hlock);
	if (!st->health_us || now - st->health_us >= CH_HEALTH_EVERY_US) {
		/* with a cluster, through the Distributed table: every shard
		 * must answer (a write needs them all) */
		st->health_ret = ch_query(st->hc, st->cluster ? "SELECT count() FROM agents" :
					  "SELECT 1", NULL, st->health_err,
					  sizeof(st->health_err));
		st->health_us = now;
	}
	ret = st->health_ret;
	if (ret)
		set_err(err, errlen, "%s", st->health_err);
	pthread_mutex_unlock(&st->hlock);
	return ret;
}

/* ---- retention ---------------------------------------------------------- */

/*
 * Drop the oldest whole day of spans, span_index, span_parts and
 * query_windows on one
 * server (the local tables of a cluster) if it ended before before_us.
 * Returns the rows dropped, 0 when no such day is left, or -errno.
 */
static int retain_on(struct store_be *st, struct ch_conn *c, uint64_t before_us,
		     char *err, size_t errlen)
{
	const char *sfx = st->cluster ? "_local" : "";
	struct wbuf out = { 0 };
	char sql[1024], day[16] = "";
	time_t t = (time_t)(before_us / 1000000u / 86400u * 86400u);
	struct tm tm;
	uint64_t rows = 0;
	int ret;

	gmtime_r(&t, &tm);
	strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	/* the oldest day before the cutoff's day: it ended before the cutoff */
	snprintf(sql, sizeof(sql),
		 "SELECT min(partition), sum(rows) FROM system.parts WHERE active AND"
		 " database = '%s' AND table IN ('spans%s', 'span_index%s', 'span_parts%s',"
		 " 'query_windows%s') AND partition < '%s' AND partition = (SELECT"
		 " min(partition) FROM system.parts WHERE active AND database = '%s' AND"
		 " table IN ('spans%s', 'span_index%s', 'span_parts%s', 'query_windows%s')"
		 " AND partition < '%s') FORMAT TabSeparated", st->db, sfx, sfx, sfx, sfx,
		 day, st->db, sfx, sfx, sfx, sfx, day);
	ret = ch_query(c, sql, &out, err, errlen);
	if (!ret) {
		wbuf_u8(&out, 0);
		if (sscanf((const char *)out.p, "%15s\t%" SCNu64, day, &rows) != 2 || !rows)
			rows = 0;
	}
	wbuf_free(&out);
	for (int i = 0; !ret && rows && i < 4; i++) {
		static const char *const tables[] = { "spans", "span_index", "span_parts",
						       "query_windows" };

		snprintf(sql, sizeof(sql), "ALTER TABLE %s.%s%s DROP PARTITION '%s'",
			 st->db, tables[i], sfx, day);
		ret = ch_query(c, sql, NULL, err, errlen);
	}
	if (!ret && rows)
		pr_info("store: clickhouse: retention dropped day %s (%" PRIu64 " rows)",
			day, rows);
	return ret ? ret : (int)(rows > INT32_MAX ? INT32_MAX : rows);
}

int ch__set_retention(struct store_be *st, uint64_t retention_us, char *err,
		      size_t errlen)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < st->nurls; i++) {
		struct ch_conn *c = ch_conn_new(st->urls[i], st->db, 0, err, errlen);

		ret = c ? ch_schema_ttl(c, &st->w, retention_us, err, errlen) : -errno;
		ch_conn_free(c);
	}
	return ret;
}

static int retain(struct store_be *st, uint64_t before_us)
{
	char err[400] = "";
	int total = 0, ret = 0;

	for (size_t i = 0; i < st->nurls && !ret; i++) {
		struct ch_conn *c = i ? ch_conn_new(st->urls[i], st->db, 0, err,
						    sizeof(err)) : st->c;

		ret = c ? retain_on(st, c, before_us, err, sizeof(err)) : -errno;
		if (c != st->c)
			ch_conn_free(c);
		if (ret > 0) {
			total += ret;
			ret = 0;
		}
	}
	if (ret) {
		pr_warn("store: clickhouse: retention: %s", err);
		return ret;
	}
	if (!total) {
		char sql[256];
		uint64_t c = before_us > CH_NAME_SLACK_US ? before_us - CH_NAME_SLACK_US : 0;

		/* names no span newer than the cutoff carried (a mutation) */
		snprintf(sql, sizeof(sql), "ALTER TABLE %s.names%s DELETE WHERE last_us < %"
			 PRIu64, st->db, st->cluster ? "_local" : "", c);
		for (size_t i = 0; i < st->nurls && st->retained; i++) {
			struct ch_conn *cn = i ? ch_conn_new(st->urls[i], st->db, 0, err,
							     sizeof(err)) : st->c;

			if (cn && ch_query(cn, sql, NULL, err, sizeof(err)))
				pr_warn("store: clickhouse: pruning names: %s", err);
			if (cn != st->c)
				ch_conn_free(cn);
		}
		st->retained = 0;
		memset(st->names, 0, sizeof(st->names));
	} else {
		st->retained = 1;
	}
	return total;
}

int ch__retain(struct store_be *st, uint64_t before_us, unsigned chunk)
{
	int ret;

	(void)chunk;   /* a day partition goes at once: dropping costs no rewrite */
	pthread_mutex_lock(&st->wlock);
	ret = retain(st, before_us);
	pthread_mutex_unlock(&st->wlock);
	return ret;
}

/* ---- autocomplete ------------------------------------------------------- */

int ch__set_autocomplete_keys(struct store_be *st, const char *const *keys, size_t n)
{
	size_t size = (n + 1) * sizeof(char *);
	char **v, *p;

	for (size_t i = 0; i < n; i++)
		size += strlen(keys[i]) + 1;
	v = malloc(size);
	if (!v)
		return -ENOMEM;
	/* the pointers, then the strings, in one block */
	p = (char *)(v + n + 1);
	for (size_t i = 0; i < n; i++) {
		v[i] = p;
		p = stpcpy(p, keys[i]) + 1;
	}
	v[n] = NULL;
	pthread_mutex_lock(&st->wlock);
	free(st->ac_keys);
	st->ac_keys = v;
	st->nac_keys = n;
	pthread_mutex_unlock(&st->wlock);
	return 0;
}

const struct store_ops ch_store_ops = {
	.name = "clickhouse",
	.schema_version = CH_SCHEMA_VERSION,
	.writers = CH_WRITERS,
	.open = ch__open,
	.close = ch__close,
	.write = ch__write,
	.agent_hello = ch__agent_hello,
	.agent_stats = ch__agent_stats,
	.agent_last_seq = ch__agent_last_seq,
	.retain = ch__retain,
	.put_windows = ch__put_windows,
	.standing_put = ch__standing_put,
	.standing_list = ch__standing_list,
	.standing_lease = ch__standing_lease,
	.collector_beat = ch__collector_beat,
	.collectors = ch__collectors,
	.windows_from = "query_windows FINAL",
	.set_retention = ch__set_retention,
	.health = ch__health,
	.sql = ch__sql,
	.set_autocomplete_keys = ch__set_autocomplete_keys,
	.autocomplete_values = ch__autocomplete_values,
	.reader_new = ch__reader_new,
	.reader_free = ch__reader_free,
	.services = ch__services,
	.span_names = ch__span_names,
	.remote_services = ch__remote_services,
	.trace = ch__trace,
	.traces = ch__traces,
	.counts = ch__counts,
	.scan = ch__scan,
	.scan_traces = ch__scan_traces,
	.agents = ch__agents,
};
