// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's schema, created on first start and migrated by
 * version (table fay_schema).  Made to work on ClickHouse 18.16 (Debian
 * 12): no TTL, no data-skipping indexes, no codecs, so both lookups are
 * primary-key seeks on two tables (jaeger-clickhouse's and Uptrace's
 * layout); newer servers get codecs, skip indexes and a TTL on top
 * (ch_ddl.c: SELECT version() decides):
 *
 *   spans       every span, ReplacingMergeTree(ver) partitioned by day,
 *               ordered by trace id: a trace is one seek.  A row's key
 *               (trace, span id, origin, src, seq, no) is the same when a
 *               batch is sent again, so a resent batch replaces rows
 *               instead of adding them; readers keep the newest version
 *               of a key (ch_read.c), so that holds before any merge ran.
 *   span_index  one row per span: (service, name, start) -> trace id and
 *               duration, MergeTree partitioned by day: trace search.
 *               Since schema 2 the service and the span name are their
 *               murmurHash2_64 (service_h, name_h): a part of integers
 *               is sorted and merged without string compares, which
 *               made this table a third of the server's CPU at ingest
 *               (bench/RESULTS.md); a hash that collides only adds a
 *               candidate, and every candidate trace is tested whole.
 *   span_parts  BlkKin partial records, as spans; ch.c merges every span
 *               id a batch touched from all its parts (zparts_merge())
 *               into spans with origin 1.
 *   names       services, span names and remote services (autocomplete).
 *   agents      one row per agent and update (ReplacingMergeTree(ver)).
 *   query_windows  standing queries' windows (schema 3): one row per
 *               (name, end_us, host), the merged answer with host '*',
 *               ReplacingMergeTree(written_us) partitioned by day (of
 *               the window's end) like spans, so retention drops it with
 *               them; a window written again (a retry, an amended one,
 *               two collectors on one database) is one row.  Readers
 *               read it FINAL (store/windows.c).  Sharded by name.
 *   standing_queries  standing queries' definitions, shared by every
 *               collector on the database (schema 4): one row per name
 *               and change, ReplacingMergeTree(ver); the newest row of a
 *               name wins, a drop is a row with deleted = 1.
 *   standing_lease  which collector runs them (schema 4): one row per
 *               taking or renewal, the newest (ver) names the holder and
 *               until when (ch_standing.c).
 *   collectors  the collectors on the database beside each other (schema
 *               5): one row per beat, the newest (ver) of an id says its
 *               address, lease id, hosts and last beat (ch_standing.c).
 *
 * Tags and annotations are Nested columns (parallel arrays tags.key /
 * tags.value), so SQL reaches them: tags.value[indexOf(tags.key, 'k')].
 * With a cluster, each table is NAME_local on every shard and NAME is a
 * Distributed table over them, sharded by trace id (agents and names by
 * a hash of their key), so a trace lives on one shard.
 *
 * Migrating: a collector that finds the schema behind takes the
 * database's migration lock (ch_lock.c: a table only one CREATE makes;
 * the others wait, a dead holder's lock is broken), reads the version
 * again and runs the steps left.  Collectors started at once on one
 * database (systemd after an upgrade) thus migrate it once and all
 * start.  Every step can be run again from any point it was stopped at
 * (a holder killed -9), so the next holder finishes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "store/ch_int.h"

/* The tables as this build makes them (schema CH_SCHEMA_VERSION);
 * ch_migrations[v - 1] takes a database from v - 1 to v. */
static const struct ch_table ch_tables[] = {
	{ "spans",
	  "day Date, trace_hi UInt64, trace_lo UInt64, id UInt64, origin UInt8,"
	  " src UInt64, seq UInt64, no UInt32, ver UInt64, parent_id UInt64,"
	  " kind UInt8, name String, local_service String, local_ipv4 String,"
	  " local_ipv6 String, local_port UInt16, remote_service String,"
	  " remote_ipv4 String, remote_ipv6 String, remote_port UInt16,"
	  " start_us UInt64, duration_us UInt64, shared UInt8, debug UInt8,"
	  " error UInt8, annotations Nested(ts_us UInt64, value String),"
	  " tags Nested(key String, value String)",
	  "ReplacingMergeTree(ver) PARTITION BY day"
	  " ORDER BY (trace_lo, trace_hi, id, origin, src, seq, no)",
	  "trace_lo" },
	{ "span_index",     /* schema 1: service String, name String */
	  "day Date, service_h UInt64, name_h UInt64, start_us UInt64,"
	  " duration_us UInt64, trace_hi UInt64, trace_lo UInt64",
	  "MergeTree PARTITION BY day ORDER BY (service_h, name_h, start_us)",
	  "trace_lo" },
	{ "span_parts",
	  "day Date, trace_hi UInt64, trace_lo UInt64, id UInt64, src UInt64,"
	  " seq UInt64, no UInt32, ver UInt64, parent_id UInt64, name String,"
	  " service String, ipv4 String, ipv6 String, port UInt16,"
	  " remote_service String, remote_ipv4 String, remote_ipv6 String,"
	  " remote_port UInt16, debug UInt8, is_tag UInt8, ts_us UInt64,"
	  " key String, value String",
	  "ReplacingMergeTree(ver) PARTITION BY day"
	  " ORDER BY (trace_lo, trace_hi, id, src, seq, no)",
	  "trace_lo" },
	{ "names",
	  "kind UInt8, service String, name String, last_us UInt64",
	  "ReplacingMergeTree(last_us) ORDER BY (kind, service, name)",
	  "cityHash64(service)" },
	{ "agents",
	  "agent_id String, host String, version String, last_seq UInt64,"
	  " first_seen_us UInt64, last_seen_us UInt64, batches UInt64, spans UInt64,"
	  " has_stats UInt8, stats String, stats_us UInt64, ver UInt64",
	  "ReplacingMergeTree(ver) ORDER BY agent_id",
	  "cityHash64(agent_id)" },
	{ "query_windows",
	  "day Date, name String, start_us UInt64, end_us UInt64, host String,"
	  " answer String, asked UInt32, answered UInt32, missing String,"
	  " provisional UInt8, amended UInt8, written_us UInt64",
	  "ReplacingMergeTree(written_us) PARTITION BY day ORDER BY (name, end_us, host)",
	  "cityHash64(name)" },
	{ "standing_queries",
	  "name String, query String, grace_ms UInt64, created_ms UInt64, deleted UInt8,"
	  " ver UInt64",
	  "ReplacingMergeTree(ver) ORDER BY name",
	  "cityHash64(name)" },
	{ "standing_lease",
	  "lease String, holder String, until_us UInt64, ver UInt64",
	  "ReplacingMergeTree(ver) ORDER BY lease",
	  "cityHash64(lease)" },
	{ "collectors",
	  "id String, run String, hosts String, beat_us UInt64, gone UInt8, ver UInt64",
	  "ReplacingMergeTree(ver) ORDER BY id",
	  "cityHash64(id)" },
};

/* The table called name in ch_tables (there is one). */
static const struct ch_table *table(const char *name)
{
	size_t i = 0;

	while (i < ARRAY_SIZE(ch_tables) - 1 && strcmp(ch_tables[i].name, name))
		i++;
	return &ch_tables[i];
}

static int run(struct ch_conn *c, const char *sql, char *err, size_t errlen)
{
	return ch_query(c, sql, NULL, err, errlen);
}

const struct ch_table *ch_schema_tables(size_t *n)
{
	*n = ARRAY_SIZE(ch_tables);
	return ch_tables;
}

/* The Distributed table t over its local tables (with a cluster). */
static int create_dist(struct ch_conn *c, const struct ch_where *w,
		       const struct ch_table *t, char *err, size_t errlen)
{
	char dist[1024];

	snprintf(dist, sizeof(dist), "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_local"
		 " ENGINE = Distributed(%s, %s, %s_local, %s)", w->db, t->name,
		 w->db, t->name, w->cluster, w->db, t->name, t->shard_key);
	return run(c, dist, err, errlen);
}

/* Create t as table as (NAME_local with a cluster, without its
 * Distributed table). */
static int create_as(struct ch_conn *c, const struct ch_where *w, const struct ch_table *t,
		     const char *as, unsigned feats, char *err, size_t errlen)
{
	struct wbuf sql = { 0 };
	int ret;

	ch_ddl_create_as(&sql, t, as, w, feats);
	wbuf_u8(&sql, 0);
	ret = sql.err ? -ENOMEM : run(c, (const char *)sql.p, err, errlen);
	wbuf_free(&sql);
	return ret;
}

static int create(struct ch_conn *c, const struct ch_where *w,
		  const struct ch_table *t, unsigned feats, char *err, size_t errlen)
{
	int ret = create_as(c, w, t, t->name, feats, err, errlen);

	return ret || !w->cluster ? ret : create_dist(c, w, t, err, errlen);
}

/* A copy of a table (INSERT ... SELECT) may take this long before the
 * client gives up (a day): its time grows with the table, and the
 * server goes on with it anyway after a client gave up. */
#define CH_COPY_TIMEOUT_MS (24 * 3600 * 1000L)

/* What a migration step works with: the node's connection, where the
 * tables are, the server's features, the lock it holds, the reason of a
 * failure. */
struct step {
	struct ch_conn *c;
	const struct ch_where *w;
	unsigned feats;
	struct ch_lock *lk;
	char *err;
	size_t errlen;
};

/*
 * 0 -> 1 on a new database creates the tables as this build has them
 * (ch_schema_tables()), so the later steps find them done and change
 * nothing.  (A database made at schema 1 by an older build goes through
 * 1 -> 2.)
 */
static int migrate_0_1(const struct step *s)
{
	size_t n;
	const struct ch_table *t = ch_schema_tables(&n);

	for (size_t i = 0; i < n; i++) {
		int ret = create(s->c, s->w, &t[i], s->feats, s->err, s->errlen);

		if (ret)
			return ret;
	}
	return 0;
}

/* The count() of a query (a number: whether a table or column is there),
 * or -errno. */
static int count_of(const struct step *s, const char *sql)
{
	struct wbuf out = { 0 };
	int ret = ch_query(s->c, sql, &out, s->err, s->errlen);

	if (!ret)
		ret = out.len && out.p[0] != '0';
	wbuf_free(&out);
	return ret;
}

/* Whether db.table (the local one with a cluster) is there: 1, 0, -errno. */
static int has_table(const struct step *s, const char *table)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.tables WHERE database = '%s'"
		 " AND name = '%s%s'", s->w->db, table, s->w->cluster ? "_local" : "");
	return count_of(s, sql);
}

/* Whether db.table (the local one with a cluster) has column col. */
static int has_column(const struct step *s, const char *table, const char *col)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.columns WHERE database = '%s'"
		 " AND table = '%s%s' AND name = '%s'", s->w->db, table,
		 s->w->cluster ? "_local" : "", col);
	return count_of(s, sql);
}

/*
 * 1 -> 2: span_index keyed by the hashes of service and span name.  Its
 * rows are copied into a new table, which then takes the old one's name
 * (and, with a cluster, gets a new Distributed table: the old one names
 * the old columns).  Run under the migration lock (ch_lock.c), and again
 * from the start after a failure or a holder killed at any point: a
 * table already converted is left alone (what was left undone is done),
 * a copy begun again starts empty, and a span_index renamed away without
 * its successor (a server that died in the RENAME of two tables) is put
 * back first.
 */
static int migrate_1_2(const struct step *s)
{
	const struct ch_where *w = s->w;
	const char *sfx = w->cluster ? "_local" : "";
	char sql[1024];
	int ret = has_table(s, "span_index");

	if (!ret && has_table(s, "span_index_v1") > 0) {
		snprintf(sql, sizeof(sql), "RENAME TABLE %s.span_index_v1%s TO %s.span_index%s",
			 w->db, sfx, w->db, sfx);
		ret = run(s->c, sql, s->err, s->errlen);
	}
	if (ret < 0)
		return ret;
	ret = has_column(s, "span_index", "service_h");
	if (ret > 0) {   /* converted: what a failure may have left undone */
		snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s.span_index_v1%s", w->db, sfx);
		ret = run(s->c, sql, s->err, s->errlen);
		return ret || !w->cluster ? ret :
		       create_dist(s->c, w, table("span_index"), s->err, s->errlen);
	}
	if (ret)
		return ret;
	snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s.span_index_v2%s", w->db, sfx);
	ret = run(s->c, sql, s->err, s->errlen);
	if (!ret)
		ret = create_as(s->c, w, table("span_index"), "span_index_v2", s->feats,
				s->err, s->errlen);
	if (!ret) {
		/* as long as the table's size makes it: waiters see it run */
		ch_conn_timeout(s->c, CH_COPY_TIMEOUT_MS);
		snprintf(sql, sizeof(sql), "INSERT INTO %s.span_index_v2%s SELECT day,"
			 " murmurHash2_64(service), murmurHash2_64(name), start_us, duration_us,"
			 " trace_hi, trace_lo FROM %s.span_index%s", w->db, sfx, w->db, sfx);
		ret = run(s->c, sql, s->err, s->errlen);
		ch_conn_timeout(s->c, CH_TIMEOUT_MS);
	}
	if (!ret)
		ret = ch_lock_point(s->lk, "copied", s->err, s->errlen);
	if (!ret && w->cluster) {
		snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s.span_index", w->db);
		ret = run(s->c, sql, s->err, s->errlen);
	}
	if (!ret) {
		snprintf(sql, sizeof(sql), "RENAME TABLE %s.span_index%s TO %s.span_index_v1%s,"
			 " %s.span_index_v2%s TO %s.span_index%s", w->db, sfx, w->db, sfx,
			 w->db, sfx, w->db, sfx);
		ret = run(s->c, sql, s->err, s->errlen);
	}
	if (!ret) {
		snprintf(sql, sizeof(sql), "DROP TABLE %s.span_index_v1%s", w->db, sfx);
		ret = run(s->c, sql, s->err, s->errlen);
	}
	if (!ret && w->cluster)
		ret = create_dist(s->c, w, table("span_index"), s->err, s->errlen);
	return ret;
}

int ch_server_features(struct ch_conn *c, char *version, size_t vlen, unsigned *feats,
		       char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	struct ch_version v;
	int ret = ch_query(c, "SELECT version()", &out, err, errlen);

	if (!ret) {
		wbuf_u8(&out, 0);
		snprintf(version, vlen, "%.*s", (int)strcspn((const char *)out.p, "\r\n"),
			 (const char *)out.p);
		if (out.err || ch_version_parse(version, &v)) {
			snprintf(err, errlen, "SELECT version(): '%s' is not a version", version);
			ret = -EPROTO;
		} else {
			*feats = ch_features(&v);
		}
	}
	wbuf_free(&out);
	return ret;
}

/* ch_migrations[v] takes the schema from version v to v + 1.  Append;
 * what a step does to a database at its version never changes (0 -> 1
 * makes the current tables, but a database at 0 has none: see
 * migrate_0_1()). */
/* 2 -> 3: the query_windows table (a new table: IF NOT EXISTS, so a
 * step run again, or after 0 -> 1 made it, changes nothing). */
static int migrate_2_3(const struct step *s)
{
	return create(s->c, s->w, table("query_windows"), s->feats, s->err, s->errlen);
}

/* 3 -> 4: the shared standing definitions and their lease (new tables,
 * as 2 -> 3). */
static int migrate_3_4(const struct step *s)
{
	int ret = create(s->c, s->w, table("standing_queries"), s->feats, s->err, s->errlen);

	return ret ? ret : create(s->c, s->w, table("standing_lease"), s->feats, s->err,
				  s->errlen);
}

/* 4 -> 5: the collectors beside each other on the database (a new
 * table, as 2 -> 3). */
static int migrate_4_5(const struct step *s)
{
	return create(s->c, s->w, table("collectors"), s->feats, s->err, s->errlen);
}

static int (*const ch_migrations[])(const struct step *) = {
	migrate_0_1,
	migrate_1_2,
	migrate_2_3,
	migrate_3_4,
	migrate_4_5,
};

_Static_assert(ARRAY_SIZE(ch_migrations) == CH_SCHEMA_VERSION,
	       "one migration per schema version");

/* The database's schema version (fay_schema) into *ver: 0, -EPROTO when
 * it is newer than this build's, or -errno; a reason in err. */
static int schema_version(struct ch_conn *c, const struct ch_where *w, long *ver,
			  char *err, size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[256];
	int ret;

	snprintf(sql, sizeof(sql), "SELECT max(version) FROM %s.fay_schema", w->db);
	ret = ch_query(c, sql, &out, err, errlen);
	wbuf_u8(&out, 0);
	if (!ret && out.err)
		ret = -ENOMEM;
	if (!ret)
		*ver = strtol((const char *)out.p, NULL, 10);
	if (!ret && *ver > CH_SCHEMA_VERSION) {
		snprintf(err, errlen, "database %s has fay schema %ld, newer than this"
			 " build's %d: not touched", w->db, *ver, CH_SCHEMA_VERSION);
		ret = -EPROTO;
	}
	wbuf_free(&out);
	return ret;
}

/* Migrate from *ver (read again under the lock) to CH_SCHEMA_VERSION,
 * holding the migration lock: its points between the steps. */
static int migrate(struct step *s, long ver)
{
	const struct ch_where *w = s->w;
	char sql[256];
	int ret = ch_lock_point(s->lk, "locked", s->err, s->errlen);

	if (!ret)
		ret = schema_version(s->c, w, &ver, s->err, s->errlen);
	if (!ret && ver == CH_SCHEMA_VERSION)
		pr_info("store: clickhouse: database %s: at schema %d now (another"
			" collector migrated it)", w->db, CH_SCHEMA_VERSION);
	else if (!ret)
		pr_info("store: clickhouse: database %s: migrating from schema %ld to %d",
			w->db, ver, CH_SCHEMA_VERSION);
	for (; ver < CH_SCHEMA_VERSION && !ret; ver++) {
		uint64_t t0 = clock_monotonic_ns();

		ret = ch_migrations[ver](s);
		if (!ret)
			ret = ch_lock_point(s->lk, "stepped", s->err, s->errlen);
		if (ret)
			break;
		snprintf(sql, sizeof(sql), "INSERT INTO %s.fay_schema VALUES (%ld,"
			 " toUInt64(now()) * 1000000)", w->db, ver + 1);
		ret = run(s->c, sql, s->err, s->errlen);
		if (!ret)
			pr_info("store: clickhouse: database %s: schema %ld -> %ld done in %.1f s",
				w->db, ver, ver + 1, (clock_monotonic_ns() - t0) / 1e9);
	}
	return ret;
}

int ch_schema_apply(struct ch_conn *c, const struct ch_where *w, char *err,
		    size_t errlen)
{
	struct ch_lock lk;
	struct step s = { .c = c, .w = w, .lk = &lk, .err = err, .errlen = errlen };
	char sql[512], version[64], what[128];
	long ver = 0;
	int ret;

	ret = ch_server_features(c, version, sizeof(version), &s.feats, err, errlen);
	if (ret)
		return ret;
	if ((s.feats & CH_FEAT_SKIP_EXPERIMENTAL) &&
	    ch_conn_setting(c, "allow_experimental_data_skipping_indices", "1"))
		return -ENOMEM;
	snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", w->db);
	ret = run(c, sql, err, errlen);
	if (!ret) {
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS %s.fay_schema"
			 " (version UInt32, applied_us UInt64) ENGINE = TinyLog", w->db);
		ret = run(c, sql, err, errlen);
	}
	if (!ret)
		ret = schema_version(c, w, &ver, err, errlen);
	if (ret)
		return ret;
	ch_features_str(s.feats, what, sizeof(what));
	pr_info("store: clickhouse %s, database %s at schema %ld: %s%s", version, w->db, ver,
		what, ver < CH_SCHEMA_VERSION ? " (for the tables created now)" : "");
	if (ver == CH_SCHEMA_VERSION)
		return 0;
	do {    /* a holder whose lock was broken waits for the new one */
		ret = ch_lock_take(&lk, c, w, err, errlen);
		if (ret)
			return ret;
		ret = migrate(&s, ver);
		ch_lock_give(&lk);
		if (ret == -EBUSY)
			pr_warn("store: clickhouse: %s", err);
	} while (ret == -EBUSY);
	return ret;
}

/* Whether db.table has a TTL (its engine_full says so). */
static int has_ttl(struct ch_conn *c, const char *db, const char *table, char *err,
		   size_t errlen)
{
	struct wbuf out = { 0 };
	char sql[512];
	int ret;

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.tables WHERE database = '%s'"
		 " AND name = '%s' AND engine_full LIKE '%% TTL %%'", db, table);
	ret = ch_query(c, sql, &out, err, errlen);
	if (!ret)
		ret = out.len && out.p[0] == '1';
	wbuf_free(&out);
	return ret;
}

int ch_schema_ttl(struct ch_conn *c, const struct ch_where *w, uint64_t retention_us,
		  char *err, size_t errlen)
{
	static const char *const tables[] = { "spans", "span_index", "span_parts",
					       "query_windows" };
	char version[64];
	unsigned feats = 0;
	int ret = ch_server_features(c, version, sizeof(version), &feats, err, errlen);

	for (size_t i = 0; !ret && i < ARRAY_SIZE(tables); i++) {
		struct wbuf sql = { 0 };
		char table[96];

		snprintf(table, sizeof(table), "%s%s", tables[i], w->cluster ? "_local" : "");
		if (!retention_us) {
			ret = has_ttl(c, w->db, table, err, errlen);
			if (ret <= 0)
				continue;       /* none to remove, or an error */
			ret = 0;
		}
		if (ch_ddl_ttl(&sql, w->db, table, retention_us, feats)) {
			if (!retention_us && (feats & CH_FEAT_TTL))
				pr_warn("store: clickhouse %s: %s.%s keeps the TTL an earlier"
					" --retention set (no REMOVE TTL before 21.1): rows"
					" past it are still deleted", version, w->db, table);
			continue;
		}
		wbuf_u8(&sql, 0);
		ret = sql.err ? -ENOMEM : run(c, (const char *)sql.p, err, errlen);
		wbuf_free(&sql);
	}
	if (!ret && (feats & CH_FEAT_TTL) && retention_us)
		pr_info("store: clickhouse %s: spans, span_index, span_parts, query_windows have a TTL of"
			" the retention (%" PRIu64 " s) besides the days retention drops",
			version, retention_us / 1000000);
	return ret;
}
