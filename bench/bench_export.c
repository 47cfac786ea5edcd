// SPDX-License-Identifier: MIT
/*
 * --export's cost per span, OTLP/JSON and OTLP/protobuf: encoded straight
 * from the span model (now) against the path it replaced
 * (tests/unit/otlp/otlp_export_ref.h), on the same spans in one run.
 *
 *   bench_export [-s SPANS_PER_BATCH] [-r ROUNDS] [-t SECONDS]
 *
 * One exported span is what export.c does with it: the copy queued by
 * exporter_push() and the batch's encoding when it is sent.
 *
 *   new: zspan_dup(), then otlp_req_from_zspans() + otlp_json_encode()
 *        or otlp_pb_encode();
 *   old: zjson_span() (the queue held Zipkin JSON objects), then the
 *        OTLP/JSON tree (jansson) dumped, or for protobuf its text decoded
 *        by the JSON front end and encoded by otlp_pb_encode().
 *
 * The spans: SDK-like (a 128-bit trace id, a parent, kind, a name, 8
 * tags, 2 annotations, 3 services), SPANS_PER_BATCH (500, export.c's
 * batch) a batch.  Spans/s, medians of ROUNDS of SECONDS each.  Under
 * callgrind, --toggle-collect=batch_new_json (batch_old_json,
 * batch_new_pb, batch_old_pb) counts one path's instructions (-r 1 -t 0
 * runs each path once).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "collector/zjson.h"
#include "../tests/unit/otlp/otlp_export_ref.h"

static struct zarena arena;

/* prefix and i (i < 0: prefix alone), in the arena. */
static struct zs_str str(const char *prefix, int i)
{
	char *p = zarena_alloc(&arena, 64);
	int n = i < 0 ? snprintf(p, 64, "%s", prefix) : snprintf(p, 64, "%s%d", prefix, i);

	return (struct zs_str){ p, (uint32_t)n };
}

static struct zspan *make_spans(size_t n)
{
	static const char *const svcs[] = { "frontend", "checkout", "inventory" };
	struct zspan *s = zarena_zalloc(&arena, sizeof(*s) * n);

	for (size_t i = 0; i < n; i++) {
		struct zspan *z = &s[i];

		z->trace_hi = 0x5b8efff798038103ull + i / 16;
		z->trace_lo = 0xd269b633813fc60cull;
		z->id = 0x1000 + i;
		z->parent_id = i % 16 ? 0x1000 + i - 1 : 0;
		z->kind = (uint8_t)(1 + i % 2);
		z->name = str("get /api/items/", (int)(i % 7));
		z->timestamp_us = 1700000000000000ull + i * 10;
		z->duration_us = 1234 + i;
		z->local.service = (struct zs_str){ svcs[i % 3], (uint32_t)strlen(svcs[i % 3]) };
		z->ntags = 8;
		z->tags = zarena_alloc(&arena, sizeof(*z->tags) * 8);
		for (unsigned t = 0; t < 8; t++) {
			z->tags[t].key = str("http.attr", (int)t);
			z->tags[t].value = str("a value of this span, number ", (int)t);
		}
		z->nannotations = 2;
		z->annotations = zarena_alloc(&arena, sizeof(*z->annotations) * 2);
		z->annotations[0] = (struct zs_annotation){ z->timestamp_us + 1, str("ws", -1) };
		z->annotations[1] = (struct zs_annotation){ z->timestamp_us + 2, str("wr", -1) };
	}
	return s;
}

/* ---- the two paths: queue copies, then the body; its length ------------ */

static __attribute__((noinline)) size_t batch_new(const struct zspan *s, size_t n, int pb)
{
	struct zspan **blocks = calloc(n, sizeof(*blocks));
	struct zspan *batch = malloc(sizeof(*batch) * n);
	struct zarena a = { 0 };
	struct otlp_req r;
	void *body = NULL;
	size_t len = 0;

	if (!blocks || !batch)
		goto out;
	for (size_t i = 0; i < n; i++) {
		blocks[i] = zspan_dup(&s[i]);
		if (!blocks[i])
			goto out;
		batch[i] = *blocks[i];
	}
	if (!otlp_req_from_zspans(batch, n, &a, &r)) {
		if (pb)
			otlp_pb_encode(&r, &body, &len);
		else
			otlp_json_encode(&r, (char **)&body, &len);
	}
	zarena_reset(&a);
	free(body);
out:
	for (size_t i = 0; blocks && i < n; i++)
		free(blocks[i]);
	free(blocks);
	free(batch);
	return len;
}

static __attribute__((noinline)) size_t batch_old(const struct zspan *s, size_t n, int pb)
{
	json_t *q = json_array(), *doc;
	void *body = NULL;
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(q, zjson_span(&s[i]));
	if (pb) {
		ref_from_zspans_pb(q, &body, &len);
	} else {
		doc = ref_from_zspans_json(q);
		body = json_dumps(doc, JSON_COMPACT);
		len = body ? strlen(body) : 0;
		json_decref(doc);
	}
	free(body);
	json_decref(q);
	return len;
}

/* Named for callgrind's --toggle-collect. */
static __attribute__((noinline)) size_t batch_new_json(const struct zspan *s, size_t n)
{
	return batch_new(s, n, 0);
}

static __attribute__((noinline)) size_t batch_old_json(const struct zspan *s, size_t n)
{
	return batch_old(s, n, 0);
}

static __attribute__((noinline)) size_t batch_new_pb(const struct zspan *s, size_t n)
{
	return batch_new(s, n, 1);
}

static __attribute__((noinline)) size_t batch_old_pb(const struct zspan *s, size_t n)
{
	return batch_old(s, n, 1);
}

typedef size_t batch_fn(const struct zspan *s, size_t n);

/* Spans/s of fn over secs (at least one batch). */
static double rate(batch_fn *fn, const struct zspan *s, size_t n, double secs)
{
	double t0 = bench_now_s(), t;
	size_t spans = 0;

	do {
		fn(s, n);
		spans += n;
		t = bench_now_s() - t0;
	} while (t < secs);
	return spans / t;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		batch_fn *fn;
	} paths[] = {
		{ "OTLP/JSON, from the span model", batch_new_json },
		{ "OTLP/JSON, through Zipkin JSON (jansson)", batch_old_json },
		{ "OTLP/protobuf, from the span model", batch_new_pb },
		{ "OTLP/protobuf, through Zipkin JSON and OTLP/JSON", batch_old_pb },
	};
	enum { NP = sizeof(paths) / sizeof(paths[0]) };
	size_t n = 500;
	int rounds = 5;
	double secs = 0.5, v[NP][64];
	struct zspan *s;

	for (int o; (o = getopt(argc, argv, "s:r:t:")) != -1;) {
		if (o == 's')
			n = strtoul(optarg, NULL, 10);
		else if (o == 'r')
			rounds = atoi(optarg);
		else if (o == 't')
			secs = atof(optarg);
		else
			return fprintf(stderr, "usage: bench_export [-s SPANS] [-r ROUNDS] [-t SECONDS]\n"), 2;
	}
	if (!n || rounds < 1 || rounds > 64)
		return fprintf(stderr, "bench_export: -s > 0, -r 1..64\n"), 2;
	s = make_spans(n);
	if (batch_new_json(s, n) != batch_old_json(s, n) ||
	    batch_new_pb(s, n) != batch_old_pb(s, n))
		return fprintf(stderr, "bench_export: the two paths' bodies differ in length\n"), 1;
	bench_loadavg("before");
	for (int r = 0; r < rounds; r++)
		for (int p = 0; p < NP; p++) {
			int k = (p + r) % NP;   /* the order turns each round */

			v[k][r] = rate(paths[k].fn, s, n, secs);
		}
	printf("%zu spans a batch, medians of %d rounds of %.2f s\n", n, rounds, secs);
	for (int p = 0; p < NP; p++)
		printf("  %-50s %10.0f spans/s\n", paths[p].name, median(v[p], (unsigned)rounds));
	bench_loadavg("after");
	zarena_reset(&arena);
	return 0;
}
