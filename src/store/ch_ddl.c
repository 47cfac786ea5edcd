// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's DDL for the server it talks to: what the
 * server's version (SELECT version()) offers, and the CREATE TABLE and
 * TTL statements that use it.  Pure text, no I/O (ch_schema.c runs them;
 * tests/unit/store/test_ch_ddl.c checks the exact SQL per version).
 *
 *   TTL             19.6+   --retention as a table TTL on spans,
 *                           span_index, span_parts (besides the
 *                           partitions retention drops)
 *   skip indexes    19.8+   bloom_filter on span_index's trace id,
 *                           minmax on its duration; before 20.1 they
 *                           need allow_experimental_data_skipping_indices
 *   codecs          19.10+  Delta/DoubleDelta/T64 + ZSTD on times and
 *                           durations, ZSTD on strings
 *   REMOVE TTL      21.1+   --retention 0 after a TTL was set (assumed:
 *                           older servers keep the TTL, with a warning)
 *
 * 18.16 (Debian 12) has none: its DDL is the plain one.  Only tables
 * created by this server get codecs and indexes; tables an older server
 * or fay made stay as they are (CREATE TABLE IF NOT EXISTS), and work
 * the same.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "store/ch_int.h"

int ch_version_parse(const char *s, struct ch_version *v)
{
	unsigned maj, min;

	if (!s || sscanf(s, "%u.%u", &maj, &min) != 2 || maj > 1000 || min > 1000)
		return -EINVAL;
	v->major = maj;
	v->minor = min;
	return 0;
}

static int at_least(const struct ch_version *v, unsigned maj, unsigned min)
{
	return v->major > maj || (v->major == maj && v->minor >= min);
}

unsigned ch_features(const struct ch_version *v)
{
	unsigned f = 0;

	if (at_least(v, 19, 6))
		f |= CH_FEAT_TTL;
	if (at_least(v, 19, 8)) {
		f |= CH_FEAT_SKIP_INDEX;
		if (!at_least(v, 20, 1))
			f |= CH_FEAT_SKIP_EXPERIMENTAL;
	}
	if (at_least(v, 19, 10))
		f |= CH_FEAT_CODECS;
	if (at_least(v, 21, 1))
		f |= CH_FEAT_REMOVE_TTL;
	return f;
}

void ch_features_str(unsigned f, char *buf, size_t len)
{
	snprintf(buf, len, "TTL %s, codecs %s, skip indexes %s%s",
		 f & CH_FEAT_TTL ? "yes" : "no", f & CH_FEAT_CODECS ? "yes" : "no",
		 f & CH_FEAT_SKIP_INDEX ? "yes" : "no",
		 f & CH_FEAT_SKIP_EXPERIMENTAL ? " (experimental setting)" : "");
}

/* A column's codec where the server has them. */
struct ch_codec {
	const char *table, *column, *codec;
};

static const struct ch_codec ch_codecs[] = {
	{ "spans", "start_us", "CODEC(Delta, ZSTD(1))" },
	{ "spans", "duration_us", "CODEC(T64, ZSTD(1))" },
	{ "spans", "ver", "CODEC(Delta, ZSTD(1))" },
	{ "spans", "name", "CODEC(ZSTD(1))" },
	{ "spans", "local_service", "CODEC(ZSTD(1))" },
	{ "spans", "remote_service", "CODEC(ZSTD(1))" },
	{ "span_index", "start_us", "CODEC(DoubleDelta, ZSTD(1))" },
	{ "span_index", "duration_us", "CODEC(T64, ZSTD(1))" },
	{ "span_parts", "ts_us", "CODEC(Delta, ZSTD(1))" },
	{ "span_parts", "value", "CODEC(ZSTD(1))" },
};

/* Data-skipping indexes where the server has them. */
static const struct ch_codec ch_indexes[] = {
	{ "span_index", "idx_trace", "INDEX idx_trace trace_lo TYPE bloom_filter GRANULARITY 4" },
	{ "span_index", "idx_duration", "INDEX idx_duration duration_us TYPE minmax GRANULARITY 1" },
};

static const char *codec_of(const char *table, const char *col, size_t n)
{
	for (size_t i = 0; i < ARRAY_SIZE(ch_codecs); i++)
		if (!strcmp(ch_codecs[i].table, table) && strlen(ch_codecs[i].column) == n &&
		    !memcmp(ch_codecs[i].column, col, n))
			return ch_codecs[i].codec;
	return NULL;
}

void ch_ddl_create(struct wbuf *out, const struct ch_table *t, const struct ch_where *w,
		   unsigned feats)
{
	ch_ddl_create_as(out, t, t->name, w, feats);
}

void ch_ddl_create_as(struct wbuf *out, const struct ch_table *t, const char *as,
		      const struct ch_where *w, unsigned feats)
{
	const char *p = t->cols;
	int first = 1;

	ch_sql_add(out, "CREATE TABLE IF NOT EXISTS %s.%s%s (", w->db, as,
		   w->cluster ? "_local" : "");
	/* the columns, split at the commas outside parentheses (Nested) */
	while (*p) {
		const char *e = p, *sp;
		int depth = 0;

		while (*e && (depth || *e != ',')) {
			depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
			e++;
		}
		sp = memchr(p, ' ', (size_t)(e - p));
		ch_sql_add(out, "%s%.*s", first ? "" : ", ", (int)(e - p), p);
		if ((feats & CH_FEAT_CODECS) && sp) {
			const char *codec = codec_of(t->name, p, (size_t)(sp - p));

			if (codec)
				ch_sql_add(out, " %s", codec);
		}
		first = 0;
		p = *e ? e + 1 : e;
		while (*p == ' ')
			p++;
	}
	for (size_t i = 0; (feats & CH_FEAT_SKIP_INDEX) && i < ARRAY_SIZE(ch_indexes); i++)
		if (!strcmp(ch_indexes[i].table, t->name))
			ch_sql_add(out, ", %s", ch_indexes[i].codec);
	ch_sql_add(out, ") ENGINE = %s", t->engine);
}

int ch_ddl_ttl(struct wbuf *out, const char *db, const char *table, uint64_t retention_us,
	       unsigned feats)
{
	if (!(feats & CH_FEAT_TTL))
		return -EOPNOTSUPP;
	if (!retention_us) {
		if (!(feats & CH_FEAT_REMOVE_TTL))
			return -EOPNOTSUPP;
		ch_sql_add(out, "ALTER TABLE %s.%s REMOVE TTL", db, table);
		return 0;
	}
	/* a day's rows go once the whole day is older than the retention,
	 * as ch__retain() drops it: its start + 86400 s + the retention */
	ch_sql_add(out, "ALTER TABLE %s.%s MODIFY TTL toDateTime(day) + INTERVAL %" PRIu64
		   " SECOND", db, table, 86400 + (retention_us + 999999) / 1000000);
	return 0;
}
