// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's DDL per server version (src/store/ch_ddl.c):
 * the exact CREATE TABLE and TTL statements for 18.16 (Debian 12: plain,
 * the ones tests run live), 19.8 (TTL, skip indexes behind the
 * experimental setting, no codecs), 20.3 (codecs and indexes) and 23.8
 * (and REMOVE TTL); versions that do not parse are refused.
 */
#include <errno.h>
#include <string.h>

#include "store/ch_int.h"
#include "test.h"

static const struct ch_table *table(const char *name)
{
	size_t n;
	const struct ch_table *t = ch_schema_tables(&n);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return &t[i];
	return NULL;
}

/* The CREATE of table name on version ver, one node or a cluster. */
static void create_is(const char *ver, const char *name, const char *cluster,
		      const char *want)
{
	struct ch_where w = { .db = "fay", .cluster = cluster };
	struct ch_version v;
	struct wbuf out = { 0 };

	ok(ch_version_parse(ver, &v) == 0, "%s parses", ver);
	ch_ddl_create(&out, table(name), &w, ch_features(&v));
	wbuf_u8(&out, 0);
	is_str((const char *)out.p, want, "%s: CREATE TABLE %s%s", ver, name,
	       cluster ? " (cluster)" : "");
	wbuf_free(&out);
}

static void ttl_is(const char *ver, uint64_t retention_us, int want_ret, const char *want)
{
	struct ch_version v;
	struct wbuf out = { 0 };
	int ret;

	ch_version_parse(ver, &v);
	ret = ch_ddl_ttl(&out, "fay", "spans", retention_us, ch_features(&v));
	wbuf_u8(&out, 0);
	is_int(ret, want_ret, "%s: TTL of %llu us: %d", ver, (unsigned long long)retention_us,
	       want_ret);
	is_str((const char *)out.p, want, "... the statement");
	wbuf_free(&out);
}

static void features(void)
{
	static const struct {
		const char *ver, *str;
		unsigned feats;
	} v[] = {
		{ "18.16.1", "TTL no, codecs no, skip indexes no", 0 },
		{ "19.6.2.11", "TTL yes, codecs no, skip indexes no", CH_FEAT_TTL },
		{ "19.8.3.8", "TTL yes, codecs no, skip indexes yes (experimental setting)",
		  CH_FEAT_TTL | CH_FEAT_SKIP_INDEX | CH_FEAT_SKIP_EXPERIMENTAL },
		{ "19.17.9.60", "TTL yes, codecs yes, skip indexes yes (experimental setting)",
		  CH_FEAT_TTL | CH_FEAT_SKIP_INDEX | CH_FEAT_SKIP_EXPERIMENTAL | CH_FEAT_CODECS },
		{ "20.3.5.21", "TTL yes, codecs yes, skip indexes yes",
		  CH_FEAT_TTL | CH_FEAT_SKIP_INDEX | CH_FEAT_CODECS },
		{ "23.8.2.7", "TTL yes, codecs yes, skip indexes yes",
		  CH_FEAT_TTL | CH_FEAT_SKIP_INDEX | CH_FEAT_CODECS | CH_FEAT_REMOVE_TTL },
	};
	struct ch_version cv;
	char buf[128];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ok(ch_version_parse(v[i].ver, &cv) == 0, "%s parses", v[i].ver);
		is_int((int)ch_features(&cv), (int)v[i].feats, "%s: features", v[i].ver);
		ch_features_str(ch_features(&cv), buf, sizeof(buf));
		is_str(buf, v[i].str, "%s: as logged", v[i].ver);
	}
	is_int(ch_version_parse("", &cv), -EINVAL, "'' is no version");
	is_int(ch_version_parse("nineteen", &cv), -EINVAL, "'nineteen' is no version");
	is_int(ch_version_parse("19", &cv), -EINVAL, "'19' is no version");
}

#define SPANS_COLS_PLAIN "day Date, trace_hi UInt64, trace_lo UInt64, id UInt64, origin UInt8," \
	" src UInt64, seq UInt64, no UInt32, ver UInt64, parent_id UInt64, kind UInt8," \
	" name String, local_service String, local_ipv4 String, local_ipv6 String," \
	" local_port UInt16, remote_service String, remote_ipv4 String, remote_ipv6 String," \
	" remote_port UInt16, start_us UInt64, duration_us UInt64, shared UInt8, debug UInt8," \
	" error UInt8, annotations Nested(ts_us UInt64, value String)," \
	" tags Nested(key String, value String)"
#define SPANS_ENGINE ") ENGINE = ReplacingMergeTree(ver) PARTITION BY day" \
	" ORDER BY (trace_lo, trace_hi, id, origin, src, seq, no)"
#define INDEX_ENGINE ") ENGINE = MergeTree PARTITION BY day ORDER BY (service_h, name_h, start_us)"

static void creates(void)
{
	create_is("18.16.1", "spans", NULL,
		  "CREATE TABLE IF NOT EXISTS fay.spans (" SPANS_COLS_PLAIN SPANS_ENGINE);
	create_is("18.16.1", "span_index", NULL,
		  "CREATE TABLE IF NOT EXISTS fay.span_index (day Date, service_h UInt64,"
		  " name_h UInt64, start_us UInt64, duration_us UInt64, trace_hi UInt64,"
		  " trace_lo UInt64" INDEX_ENGINE);
	create_is("18.16.1", "span_index", "c2",
		  "CREATE TABLE IF NOT EXISTS fay.span_index_local (day Date, service_h UInt64,"
		  " name_h UInt64, start_us UInt64, duration_us UInt64, trace_hi UInt64,"
		  " trace_lo UInt64" INDEX_ENGINE);
	create_is("19.8.3.8", "spans", NULL,
		  "CREATE TABLE IF NOT EXISTS fay.spans (" SPANS_COLS_PLAIN SPANS_ENGINE);
	create_is("19.8.3.8", "span_index", NULL,
		  "CREATE TABLE IF NOT EXISTS fay.span_index (day Date, service_h UInt64,"
		  " name_h UInt64, start_us UInt64, duration_us UInt64, trace_hi UInt64,"
		  " trace_lo UInt64,"
		  " INDEX idx_trace trace_lo TYPE bloom_filter GRANULARITY 4,"
		  " INDEX idx_duration duration_us TYPE minmax GRANULARITY 1" INDEX_ENGINE);
	for (int i = 0; i < 2; i++) {
		const char *ver = i ? "23.8.2.7" : "20.3.5.21";

		create_is(ver, "spans", NULL,
			  "CREATE TABLE IF NOT EXISTS fay.spans (day Date, trace_hi UInt64,"
			  " trace_lo UInt64, id UInt64, origin UInt8, src UInt64, seq UInt64,"
			  " no UInt32, ver UInt64 CODEC(Delta, ZSTD(1)), parent_id UInt64,"
			  " kind UInt8, name String CODEC(ZSTD(1)),"
			  " local_service String CODEC(ZSTD(1)), local_ipv4 String,"
			  " local_ipv6 String, local_port UInt16,"
			  " remote_service String CODEC(ZSTD(1)), remote_ipv4 String,"
			  " remote_ipv6 String, remote_port UInt16,"
			  " start_us UInt64 CODEC(Delta, ZSTD(1)),"
			  " duration_us UInt64 CODEC(T64, ZSTD(1)), shared UInt8, debug UInt8,"
			  " error UInt8, annotations Nested(ts_us UInt64, value String),"
			  " tags Nested(key String, value String)" SPANS_ENGINE);
		create_is(ver, "span_index", i ? "c2" : NULL, i ?
			  "CREATE TABLE IF NOT EXISTS fay.span_index_local (day Date,"
			  " service_h UInt64, name_h UInt64,"
			  " start_us UInt64 CODEC(DoubleDelta, ZSTD(1)),"
			  " duration_us UInt64 CODEC(T64, ZSTD(1)), trace_hi UInt64,"
			  " trace_lo UInt64,"
			  " INDEX idx_trace trace_lo TYPE bloom_filter GRANULARITY 4,"
			  " INDEX idx_duration duration_us TYPE minmax GRANULARITY 1" INDEX_ENGINE :
			  "CREATE TABLE IF NOT EXISTS fay.span_index (day Date,"
			  " service_h UInt64, name_h UInt64,"
			  " start_us UInt64 CODEC(DoubleDelta, ZSTD(1)),"
			  " duration_us UInt64 CODEC(T64, ZSTD(1)), trace_hi UInt64,"
			  " trace_lo UInt64,"
			  " INDEX idx_trace trace_lo TYPE bloom_filter GRANULARITY 4,"
			  " INDEX idx_duration duration_us TYPE minmax GRANULARITY 1" INDEX_ENGINE);
	}
	create_is("23.8.2.7", "agents", NULL,
		  "CREATE TABLE IF NOT EXISTS fay.agents (agent_id String, host String,"
		  " version String, last_seq UInt64, first_seen_us UInt64, last_seen_us UInt64,"
		  " batches UInt64, spans UInt64, has_stats UInt8, stats String, stats_us UInt64,"
		  " ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY agent_id");
	/* schema 3: standing queries' windows, the same on every version */
	for (size_t i = 0; i < 2; i++)
		create_is(i ? "23.8.2.7" : "18.16.1", "query_windows", i ? "two" : NULL, i ?
			  "CREATE TABLE IF NOT EXISTS fay.query_windows_local (day Date, name String,"
			  " start_us UInt64, end_us UInt64, host String, answer String, asked UInt32,"
			  " answered UInt32, missing String, provisional UInt8, amended UInt8,"
			  " written_us UInt64) ENGINE = ReplacingMergeTree(written_us) PARTITION BY"
			  " day ORDER BY (name, end_us, host)" :
			  "CREATE TABLE IF NOT EXISTS fay.query_windows (day Date, name String,"
			  " start_us UInt64, end_us UInt64, host String, answer String, asked UInt32,"
			  " answered UInt32, missing String, provisional UInt8, amended UInt8,"
			  " written_us UInt64) ENGINE = ReplacingMergeTree(written_us) PARTITION BY"
			  " day ORDER BY (name, end_us, host)");
}

/* ch_murmur64() is ClickHouse's murmurHash2_64(): values the 18.16
 * server gave (SELECT murmurHash2_64('...')), a tail alone, whole words
 * alone, and both (integration: clickhouse_schema2.sh asks the server). */
static void murmur(void)
{
	is_u64(ch_murmur64("", 0), 0, "murmurHash2_64('') = 0");
	is_u64(ch_murmur64("a", 1), 510903276987443985ull, "murmurHash2_64('a')");
	is_u64(ch_murmur64("frontend", 8), 9232993194920183797ull, "murmurHash2_64('frontend')");
	is_u64(ch_murmur64("frontend-api", 12), 14459217260263146265ull,
	       "murmurHash2_64('frontend-api')");
	is_u64(ch_murmur64("0123456789abcdef", 16), 10640085186775239623ull,
	       "murmurHash2_64('0123456789abcdef')");
}

static void ttls(void)
{
	ttl_is("18.16.1", 7ull * 86400 * 1000000, -EOPNOTSUPP, "");
	ttl_is("18.16.1", 0, -EOPNOTSUPP, "");
	ttl_is("19.6.2.11", 7ull * 86400 * 1000000, 0,
	       "ALTER TABLE fay.spans MODIFY TTL toDateTime(day) + INTERVAL 691200 SECOND");
	ttl_is("20.3.5.21", 30000000, 0,
	       "ALTER TABLE fay.spans MODIFY TTL toDateTime(day) + INTERVAL 86430 SECOND");
	ttl_is("20.3.5.21", 1500000, 0,
	       "ALTER TABLE fay.spans MODIFY TTL toDateTime(day) + INTERVAL 86402 SECOND");
	ttl_is("20.3.5.21", 0, -EOPNOTSUPP, "");
	ttl_is("23.8.2.7", 0, 0, "ALTER TABLE fay.spans REMOVE TTL");
}

int main(void)
{
	features();
	creates();
	murmur();
	ttls();
	return test_done();
}
