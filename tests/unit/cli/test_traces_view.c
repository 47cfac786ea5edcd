// SPDX-License-Identifier: MIT
/*
 * `fay traces`: the tree and waterfall layout from canned Zipkin v2 JSON:
 * tree order, depth, shared RPC halves, orphans, cycles, the time axis,
 * bar cells (ASCII and Unicode eighths), annotation marks, details, the
 * list view, the JSON summary, and the errors for malformed traces.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "cli/traces.h"
#include "test.h"

/* A blockstack-like write, spans deliberately out of order: times are
 * us after T0 = 1700000000000000 (2023-11-14 22:13:20 UTC). */
static const char *const canned =
"[\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000e1\",\n"
"  \"parentId\":\"00000000000000c1\",\"name\":\"write\",\"timestamp\":1700000000000200,\n"
"  \"duration\":200,\"localEndpoint\":{\"serviceName\":\"blocker-1\",\"ipv4\":\"127.0.0.1\",\"port\":7001},\n"
"  \"annotations\":[{\"timestamp\":1700000000000390,\"value\":\"filestore\"},\n"
"                   {\"timestamp\":1700000000000210,\"value\":\"queue\"},\n"
"                   {\"timestamp\":1700000000000300,\"value\":\"journal\"},\n"
"                   {\"timestamp\":1700000000000300,\"value\":\"sync\"}],\n"
"  \"tags\":{\"size\":\"4096\",\"object\":\"vol.0\",\"offset\":\"0\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000a1\",\n"
"  \"name\":\"write\",\"timestamp\":1700000000000000,\"duration\":1000,\n"
"  \"localEndpoint\":{\"serviceName\":\"vm-client\"},\"tags\":{\"offset\":\"4096\",\"size\":\"16384\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000b2\",\n"
"  \"parentId\":\"00000000000000a1\",\"name\":\"object\",\"timestamp\":1700000000000500,\n"
"  \"duration\":450,\"localEndpoint\":{\"serviceName\":\"composer\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000b1\",\n"
"  \"parentId\":\"00000000000000a1\",\"name\":\"object\",\"timestamp\":1700000000000100,\n"
"  \"duration\":400,\"localEndpoint\":{\"serviceName\":\"composer\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000c1\",\n"
"  \"parentId\":\"00000000000000b1\",\"name\":\"map\",\"kind\":\"SERVER\",\n"
"  \"timestamp\":1700000000000150,\"duration\":300,\"localEndpoint\":{\"serviceName\":\"mapper\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000e2\",\n"
"  \"parentId\":\"00000000000000c1\",\"name\":\"write\",\"timestamp\":1700000000000200,\n"
"  \"duration\":220,\"localEndpoint\":{\"serviceName\":\"blocker-2\"},\n"
"  \"tags\":{\"error\":\"disk full\"}},\n"
" {\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"id\":\"00000000000000f1\",\n"
"  \"parentId\":\"ffffffffffffffff\",\"name\":\"write\",\"timestamp\":1700000000000600,\n"
"  \"duration\":100,\"localEndpoint\":{\"serviceName\":\"blocker-1\"}}\n"
"]\n";

/* An RPC whose client and server halves share one span id, and a child
 * of that id (it belongs under the server half). */
static const char *const shared =
"[{\"traceId\":\"00000000000000aa\",\"id\":\"0000000000000002\",\"parentId\":\"0000000000000001\",\n"
"  \"name\":\"get\",\"kind\":\"SERVER\",\"shared\":true,\"timestamp\":20,\"duration\":50,\n"
"  \"localEndpoint\":{\"serviceName\":\"srv\"}},\n"
" {\"traceId\":\"00000000000000aa\",\"id\":\"0000000000000003\",\"parentId\":\"0000000000000002\",\n"
"  \"name\":\"disk\",\"timestamp\":30,\"duration\":10,\"localEndpoint\":{\"serviceName\":\"srv\"}},\n"
" {\"traceId\":\"00000000000000aa\",\"id\":\"0000000000000002\",\"parentId\":\"0000000000000001\",\n"
"  \"name\":\"get\",\"kind\":\"CLIENT\",\"timestamp\":10,\"duration\":80,\n"
"  \"localEndpoint\":{\"serviceName\":\"cli\"}},\n"
" {\"traceId\":\"00000000000000aa\",\"id\":\"0000000000000001\",\"name\":\"req\",\n"
"  \"timestamp\":0,\"duration\":100,\"localEndpoint\":{\"serviceName\":\"cli\"}}]";

/* Two spans naming each other as parent, plus a real root. */
static const char *const cycle =
"[{\"traceId\":\"00000000000000bb\",\"id\":\"0000000000000001\",\"name\":\"root\",\"timestamp\":0,\"duration\":10},\n"
" {\"traceId\":\"00000000000000bb\",\"id\":\"0000000000000002\",\"parentId\":\"0000000000000003\",\"name\":\"x\",\"timestamp\":5,\"duration\":1},\n"
" {\"traceId\":\"00000000000000bb\",\"id\":\"0000000000000003\",\"parentId\":\"0000000000000002\",\"name\":\"y\",\"timestamp\":6,\"duration\":1}]";

static struct tr_trace *load(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	char err[256];
	struct tr_trace *t;

	if (!j) {
		diag("bad canned JSON: line %d: %s", je.line, je.text);
		return NULL;
	}
	t = tr_trace_new(j, err, sizeof(err));
	if (!t)
		diag("tr_trace_new: %s", err);
	json_decref(j);
	return t;
}

static char *render(const struct tr_trace *t, const struct tr_view *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	tr_render_waterfall(f, t, v);
	fclose(f);
	return buf;
}

/* The line of @out that starts with @prefix (static copy), or "". */
static const char *line_of(const char *out, const char *prefix)
{
	static char line[1024];
	size_t pl = strlen(prefix);

	for (const char *p = out; p && *p;) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n >= pl && !memcmp(p, prefix, pl)) {
			snprintf(line, sizeof(line), "%.*s", (int)n, p);
			return line;
		}
		p = e ? e + 1 : NULL;
	}
	return "";
}

static void test_tree(void)
{
	struct tr_trace *t = load(canned);
	static const char *const want[] = {
		"00000000000000a1", "00000000000000b1", "00000000000000c1",
		"00000000000000e1", "00000000000000e2", "00000000000000b2",
		"00000000000000f1",
	};
	static const int depth[] = { 0, 1, 2, 3, 3, 1, 0 };
	int good = 1;

	ok(t != NULL, "blockstack trace parses");
	if (!t)
		return;
	is_int(t->nspans, 7, "7 spans");
	for (size_t k = 0; k < 7; k++) {
		const struct tr_span *s = &t->spans[t->order[k]];

		if (strcmp(s->id, want[k]) || s->depth != depth[k]) {
			diag("position %zu: got %s depth %d, want %s depth %d", k,
			     s->id, s->depth, want[k], depth[k]);
			good = 0;
		}
	}
	ok(good, "tree order: children under parents by start time, orphan last");
	is_str(t->spans[t->root].id, "00000000000000a1", "root is the span without parentId");
	ok(t->spans[t->order[6]].orphan, "span with a missing parent is marked orphan");
	ok(!t->spans[t->order[0]].orphan, "the real root is not an orphan");
	is_u64(t->t0, 1700000000000000ull, "axis starts at the first span");
	is_u64(t->t1, 1700000000001000ull, "axis ends at the last end");
	is_int(t->nservices, 5, "5 services");
	is_str(t->services[0], "vm-client", "services in tree order: vm-client first");
	is_str(t->services[2], "mapper", "services in tree order: mapper third");
	is_str(t->services[4], "blocker-2", "services in tree order: blocker-2 last");
	ok(t->error, "an error tag marks the trace");
	{
		const struct tr_span *e1 = &t->spans[t->order[3]];

		is_str(e1->annots[0].value, "queue", "annotations sorted by time");
		is_str(e1->annots[1].value, "journal", "equal times keep their order (1)");
		is_str(e1->annots[2].value, "sync", "equal times keep their order (2)");
		is_str(e1->annots[3].value, "filestore", "last annotation");
		is_str(e1->tags[0].key, "object", "tags sorted by key");
		is_str(e1->ip, "127.0.0.1", "endpoint ip");
		is_int(e1->port, 7001, "endpoint port");
	}
	tr_trace_free(t);
}

static void test_shared_and_cycle(void)
{
	struct tr_trace *t = load(shared);

	ok(t != NULL, "shared-span trace parses");
	if (t) {
		const struct tr_span *s0 = &t->spans[t->order[0]];
		const struct tr_span *s1 = &t->spans[t->order[1]];
		const struct tr_span *s2 = &t->spans[t->order[2]];
		const struct tr_span *s3 = &t->spans[t->order[3]];

		ok(!strcmp(s0->name, "req") && s0->depth == 0, "root first");
		ok(!strcmp(s1->kind, "CLIENT") && s1->depth == 1, "client half under the root");
		ok(s2->shared && s2->depth == 2, "shared server half under the client half");
		ok(!strcmp(s3->name, "disk") && s3->depth == 3,
		   "child of the shared id goes under the server half");
		tr_trace_free(t);
	}
	t = load(cycle);
	ok(t != NULL, "a parent cycle does not stop the model");
	if (t) {
		is_int(t->nspans, 3, "every span of the cycle is kept");
		is_str(t->spans[t->order[0]].name, "root", "the real root first");
		ok(t->spans[t->order[1]].depth == 0 && t->spans[t->order[2]].depth == 1,
		   "the cycle is cut at its earliest span");
		tr_trace_free(t);
	}
}

static void test_waterfall_ascii(void)
{
	struct tr_trace *t = load(canned);
	struct tr_view v = { .bar_width = 20, .label_max = 40, .ascii = 1, .details = 1 };
	char *out;

	if (!t) {
		ok(0, "canned trace");
		return;
	}
	out = render(t, &v);
	ok(out != NULL, "waterfall renders");
	if (!out)
		return;
	is_str(line_of(out, "Trace "), "Trace 4bf92f3577b34da6a3ce929d0e0e4736", "header: trace id");
	is_str(line_of(out, "  start"), "  start     2023-11-14 22:13:20.000", "header: start, local time");
	is_str(line_of(out, "  duration"),
	       "  duration  1.000ms, 7 spans, 5 services: vm-client composer mapper blocker-1 blocker-2",
	       "header: duration, spans, services");
	is_str(line_of(out, "  errors"), "  errors    1 span", "header: error count");
	/* label width = "      blocker-1 write" = 21 cells. */
	is_str(line_of(out, "vm-client"),
	       "vm-client write       |####################|   1.000ms",
	       "root bar covers the whole axis");
	is_str(line_of(out, "  composer object     |  "),
	       "  composer object     |  ########          |     400us",
	       "first object: cells 2..9 of 20");
	is_str(line_of(out, "    mapper"),
	       "    mapper map        |   ######           |     300us",
	       "mapper: cells 3..8");
	is_str(line_of(out, "      blocker-1"),
	       "      blocker-1 write |    +#++            |     200us",
	       "annotations are marks on the bar");
	is_str(line_of(out, "          @"),
	       "          @ +10us queue  +100us journal  +100us sync  +190us filestore",
	       "annotations listed with offsets from the span start");
	is_str(line_of(out, "          object"),
	       "          object=vol.0  offset=0  size=4096", "tags below the span");
	is_str(line_of(out, "      blocker-2"),
	       "      blocker-2 write |    #####           |     220us ERROR",
	       "error span marked");
	is_str(line_of(out, "blocker-1 write"),
	       "blocker-1 write       |            ##      |     100us (orphan)",
	       "orphan shown as a root, marked");
	is_str(line_of(out, "                       0"),
	       "                       0            1.000ms", "time axis");
	ok(!strchr(out, '\033'), "no escape codes without colour");
	free(out);

	v.bar_width = 40;
	out = render(t, &v);
	is_str(line_of(out, "                       0"),
	       "                       0                 500us          1.000ms",
	       "time axis: the middle where there is room");
	is_str(line_of(out, "      blocker-1 write"),
	       "      blocker-1 write |        +###+##+                        |     200us",
	       "annotation marks at a wider scale");
	v.bar_width = 20;
	free(out);

	v.details = 0;
	out = render(t, &v);
	ok(out && !strstr(out, "journal") && !strstr(out, "object="), "compact: no details");
	free(out);

	v.verbose = 1;
	out = render(t, &v);
	ok(out && strstr(out, "id 00000000000000f1  parent ffffffffffffffff (not in this trace)"),
	   "verbose: ids and the missing parent");
	ok(out && strstr(out, "at 127.0.0.1:7001"), "verbose: endpoint");
	ok(out && strstr(out, "  SERVER"), "verbose: kind");
	free(out);
	tr_trace_free(t);
}

static void test_waterfall_unicode(void)
{
	struct tr_trace *t = load(shared);
	struct tr_view v = { .bar_width = 10, .label_max = 40 };
	char *out;

	if (!t) {
		ok(0, "shared trace");
		return;
	}
	out = render(t, &v);
	/* Axis 0..100us over 80 eighths: "get" client 10..90 -> units 8..72. */
	is_str(line_of(out, "  cli get"), "  cli get      │ ████████ │      80us",
	       "unicode: whole cells");
	/* server 20..70 -> units 16..56: cells 2..6, whole. disk 30..40 ->
	 * units 24..32: cell 3. */
	is_str(line_of(out, "      srv disk"), "      srv disk │   █      │      10us",
	       "unicode: a one-cell span");
	free(out);
	tr_trace_free(t);

	{
		static const char *const partial =
		"[{\"traceId\":\"00000000000000cc\",\"id\":\"0000000000000001\",\"name\":\"a\",\n"
		"  \"timestamp\":0,\"duration\":160,\"localEndpoint\":{\"serviceName\":\"s\"}},\n"
		" {\"traceId\":\"00000000000000cc\",\"id\":\"0000000000000002\",\"parentId\":\"0000000000000001\",\n"
		"  \"name\":\"b\",\"timestamp\":10,\"duration\":25,\"localEndpoint\":{\"serviceName\":\"s\"}}]";

		t = load(partial);
		if (!t) {
			ok(0, "partial trace");
			return;
		}
		/* 10 cells over 160us: 1 eighth = 2us.  b: units 5..18 ->
		 * cell 0 right part (3/8 -> right eighth), cell 1 full,
		 * cell 2 left 2/8. */
		out = render(t, &v);
		is_str(line_of(out, "  s b"), "  s b        │▕█▎       │      25us",
		       "unicode: eighth blocks at both ends");
		free(out);
		v.color = 1;
		out = render(t, &v);
		ok(out && strstr(out, "\033[36ms\033[0m a"), "colour: service name coloured");
		ok(out && strstr(out, "│\033[36m▕█▎\033[0m"), "colour: bar in the service colour");
		free(out);
		tr_trace_free(t);
	}
}

static void test_list_and_summary(void)
{
	struct tr_trace *t[2] = { load(canned), load(shared) };
	struct tr_view v = { .ascii = 1, .label_max = 40 };
	char *buf = NULL, *s;
	size_t len = 0;
	FILE *f;
	json_t *j;

	if (!t[0] || !t[1]) {
		ok(0, "canned traces");
		goto out;
	}
	f = open_memstream(&buf, &len);
	tr_render_list(f, t, 2, &v);
	fclose(f);
	is_str(line_of(buf, "START"),
	       "START                    TRACE ID                          ROOT             SPANS  SERVICES                                   DURATION",
	       "list header");
	is_str(line_of(buf, "2023-11-14"),
	       "2023-11-14 22:13:20.000  4bf92f3577b34da6a3ce929d0e0e4736  vm-client write      7  vm-client,composer,mapper,blocker-1,+1      1.000ms  ERROR",
	       "list line: services cut with +N, error mark");
	is_str(line_of(buf, "1970-01-01"),
	       "1970-01-01 00:00:00.000  00000000000000aa                  cli req              4  cli,srv                                       100us",
	       "list line: short trace id");
	free(buf);

	j = tr_summary_json(t[0]);
	s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	is_str(s, "{\"duration\":1000,\"error\":true,\"rootName\":\"write\","
		  "\"rootService\":\"vm-client\",\"services\":[\"vm-client\",\"composer\","
		  "\"mapper\",\"blocker-1\",\"blocker-2\"],\"spanCount\":7,"
		  "\"timestamp\":1700000000000000,\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\"}",
	       "JSON summary");
	free(s);
	json_decref(j);
out:
	tr_trace_free(t[0]);
	tr_trace_free(t[1]);
}

static void test_errors(void)
{
	static const struct { const char *json, *err; } bad[] = {
		{ "{}", "a trace must be a JSON array of spans" },
		{ "[]", "the trace has no spans" },
		{ "[1]", "span 0: not a JSON object" },
		{ "[{\"traceId\":\"01\",\"id\":\"1\"},{\"traceId\":\"01\"}]", "span 1: id: missing" },
		{ "[{\"id\":\"1\"}]", "span 0: traceId: missing" },
		{ "[{\"traceId\":\"01\",\"id\":\"1\",\"annotations\":[{\"value\":\"x\"}]}]",
		  "span 0: annotations[0]: needs timestamp and value" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i].json, 0, NULL);
		struct tr_trace *t = tr_trace_new(j, err, sizeof(err));

		ok(!t && errno == EINVAL, "malformed trace %zu refused", i);
		is_str(err, bad[i].err, "  with the reason");
		tr_trace_free(t);
		json_decref(j);
	}
	tr_trace_free(NULL);
	ok(1, "tr_trace_free(NULL) is fine");
}

static void test_format(void)
{
	char b[32];

	is_str(tr_format_duration(0, b, sizeof(b)), "0us", "0us");
	is_str(tr_format_duration(999, b, sizeof(b)), "999us", "999us");
	is_str(tr_format_duration(3214, b, sizeof(b)), "3.214ms", "ms");
	is_str(tr_format_duration(1250000, b, sizeof(b)), "1.250s", "s");
	is_str(tr_format_duration(123000000, b, sizeof(b)), "2m03s", "minutes");
}

int main(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
	test_tree();
	test_shared_and_cycle();
	test_waterfall_ascii();
	test_waterfall_unicode();
	test_list_and_summary();
	test_errors();
	test_format();
	return test_done();
}
