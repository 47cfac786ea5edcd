// SPDX-License-Identifier: MIT
/*
 * The spans(...) context: the planner's fields sit where spanctx_fill()
 * writes them, tags land in the slots of the keys the query names (ints
 * as decimal text, absent ones ""), kind and error read as documented,
 * the service falls back to the process's, long strings are cut, and the
 * source's argument matches a service or a program name.
 */
#include <stdlib.h>
#include <string.h>

#include "common/spanrec.h"
#include "query/plan.h"
#include "query/query.h"
#include "query/spanctx.h"
#include "test.h"

struct rec {
	struct spanrec_fixed f;
	uint8_t items[2048];
};

static size_t used;

static void put(struct rec *r, unsigned type, uint64_t val, const char *a, const char *b)
{
	ok(!spanrec_put_item(r->items, sizeof(r->items), &used, type, val, a, strlen(a),
			     b, b ? strlen(b) : 0), "item %s fits", a);
	r->f.items_len = (uint32_t)used;
	r->f.nitems++;
}

static struct query *compile(const char *text, const struct plan **p)
{
	struct query_opts o = { .sz = sizeof(o), .cluster = true };
	struct query *q = query_new("<t>", text, strlen(text), &o);

	if (q && query_plan(q, p)) {
		diag("%s", query_error(q) ? query_error(q) : "?");
		*p = NULL;
	}
	return q;
}

static uint64_t u64_at(const unsigned char *c, const struct tp_field *f)
{
	uint64_t v;

	memcpy(&v, c + f->offset, 8);
	return v;
}

static const char *str_at(const unsigned char *c, const struct tp_field *f)
{
	static char buf[SPANCTX_STR + 1];

	memcpy(buf, c + f->offset, (size_t)f->size);
	buf[f->size] = '\0';
	return buf;
}

static const struct tp_field *col_field(const struct plan *p, int i)
{
	return p->cols[i].e->op == PX_TPFIELD ? p->cols[i].e->tpf : NULL;
}

static void test_fill(void)
{
	const struct plan *p;
	struct query *q = compile("from sp in spans(\"composer\") select {t: sp.time, d: sp.duration, "
				  "tr: sp.trace_id, s: sp.span_id, pa: sp.parent_id, pid: sp.pid, "
				  "e: sp.error, k: sp.kind, n: sp.name, sv: sp.service, "
				  "o: sp.tag(\"object\"), z: sp.tag(\"size\"), x: sp.tag(\"absent\"), "
				  "o2: sp.tag(\"object\"), th: sp.trace_id_hi, cg: sp.cgroup, "
				  "ct: sp.container}", &p);
	struct rec r = { 0 };
	struct spanrec sr;
	unsigned char *ctx;
	char err[200];
	int n;

	ok(p != NULL, "a stream of every span field plans");
	if (!p) {
		query_free(q);
		return;
	}
	is_int(p->ntags, 3, "three distinct tag keys (one named twice)");
	is_int(p->ctx_size, SPANCTX_FIXED + 3 * SPANCTX_STR, "context size");
	for (int i = 0; i < p->ncols; i++)
		ok(col_field(p, i) != NULL, "column %s reads the context", p->cols[i].name);
	ok(col_field(p, 13) == col_field(p, 10), "the same tag key, the same slot");

	used = 0;
	r.f.trace_hi = 7;
	r.f.trace_lo = 0x1122334455667788ull;
	r.f.span_id = 42;
	r.f.parent_id = 41;
	r.f.start_ns = 1700000000123456789ull;
	r.f.duration_ns = 2500000;
	r.f.kind = SPAN_KIND_SERVER;
	put(&r, SPAN_ITEM_NAME, 0, "write", NULL);
	put(&r, SPAN_ITEM_TAG, 0, "object", "obj-1");
	put(&r, SPAN_ITEM_TAG_INT, (uint64_t)-16384, "size", NULL);
	put(&r, SPAN_ITEM_EVENT, 5, "journal", NULL);
	put(&r, SPAN_ITEM_TAG, 0, "object", "obj-2");	/* the last value wins */
	ok(spanrec_decode(&r, sizeof(r.f) + used, &sr, err, sizeof(err)) > 0, "decodes: %s", err);
	ctx = malloc((size_t)p->ctx_size);
	memset(ctx, 0xa5, (size_t)p->ctx_size);
	spanctx_fill(p, &sr, "composer", 4242,
		     "/fay-test/kubepods.slice/kubepods-pod0123456789abcdef.slice/crio-0123456789ab.scope",
		     "web-1", ctx);
	is_u64(u64_at(ctx, col_field(p, 0)), r.f.start_ns, "time is the start");
	is_u64(u64_at(ctx, col_field(p, 1)), 2500000, "duration");
	is_u64(u64_at(ctx, col_field(p, 2)), r.f.trace_lo, "trace_id: the low 64 bits");
	is_u64(u64_at(ctx, col_field(p, 3)), 42, "span_id");
	is_u64(u64_at(ctx, col_field(p, 4)), 41, "parent_id");
	is_u64(u64_at(ctx, col_field(p, 5)), 4242, "pid");
	is_u64(u64_at(ctx, col_field(p, 6)), 0, "no error");
	is_str(str_at(ctx, col_field(p, 7)), "server", "kind");
	is_str(str_at(ctx, col_field(p, 8)), "write", "name");
	is_str(str_at(ctx, col_field(p, 9)), "composer", "service: the process's");
	is_str(str_at(ctx, col_field(p, 10)), "obj-2", "a string tag (last value)");
	is_str(str_at(ctx, col_field(p, 11)), "-16384", "an integer tag in decimal");
	is_str(str_at(ctx, col_field(p, 12)), "", "an absent tag is empty");
	is_u64(u64_at(ctx, col_field(p, 14)), 7, "trace_id_hi: the high 64 bits");
	is_str(str_at(ctx, col_field(p, 15)),
	       "...e/kubepods-pod0123456789abcdef.slice/crio-0123456789ab.scope",
	       "cgroup: a long path keeps its end (as a probe's s.cgroup)");
	is_str(str_at(ctx, col_field(p, 16)), "web-1", "container: the process's");
	ok(!memchr(ctx, 0xa5, (size_t)p->ctx_size), "every byte written (strings NUL padded)");

	/* an endpoint names the service; an "error" tag makes an error; a
	 * long name is cut to its slot */
	used = 0;
	memset(&r, 0, sizeof(r));
	r.f.span_id = 1;
	r.f.trace_lo = 3;
	r.f.kind = SPAN_KIND_UNSET;
	r.f.flags = 0;
	put(&r, SPAN_ITEM_NAME, 0,
	    "a-name-longer-than-sixty-four-bytes-a-name-longer-than-sixty-four-bytes", NULL);
	put(&r, SPAN_ITEM_LOCAL_EP, 80, "mapper", "127.0.0.1");
	put(&r, SPAN_ITEM_TAG, 0, "error", "EIO");
	err[0] = '\0';
	n = spanrec_decode(&r, sizeof(r.f) + used, &sr, err, sizeof(err));
	ok(n > 0, "decodes: %d %s", n, err);
	spanctx_fill(p, &sr, "blockstack", 1, NULL, NULL, ctx);
	is_u64(u64_at(ctx, col_field(p, 6)), 1, "an error tag is an error");
	is_str(str_at(ctx, col_field(p, 7)), "", "an unset kind is empty");
	is_int((int)strnlen(str_at(ctx, col_field(p, 8)), 100), SPANCTX_STR, "a long name fills its slot");
	is_str(str_at(ctx, col_field(p, 9)), "mapper", "service: the span's endpoint");
	is_str(str_at(ctx, col_field(p, 10)), "", "no tag: empty");

	/* matching: the service of the span, else of the process */
	ok(!spanctx_match(p, &sr, "composer"), "mapper's span is not composer's");
	free(ctx);
	query_free(q);
	q = compile("from sp in spans(\"mapp*\") select count()", &p);
	ok(p && spanctx_match(p, &sr, "composer"), "a pattern matches the span's service");
	query_free(q);
	q = compile("from sp in spans(\"compo?er\") select count()", &p);
	ok(p && !spanctx_match(p, &sr, "composer"), "the span's endpoint comes first");
	used = 0;
	memset(&r, 0, sizeof(r));
	r.f.span_id = r.f.trace_lo = 1;
	put(&r, SPAN_ITEM_NAME, 0, "x", NULL);
	ok(spanrec_decode(&r, sizeof(r.f) + used, &sr, err, sizeof(err)) > 0, "decodes");
	ok(p && spanctx_match(p, &sr, "composer"), "else the process's service");
	query_free(q);

	q = compile("from sp in spans select count()", &p);
	ok(p && spanctx_match(p, &sr, NULL), "spans takes every span");
	query_free(q);
}

static void test_errors(void)
{
	static const struct {
		const char *q, *msg;
	} bad[] = {
		{ "from s in syscall(\"read\") select s.tag(\"k\")", "tag() is a method of spans(...) events" },
		{ "from sp in spans select sp.tag(1)", "tag() takes one constant string" },
		{ "from sp in spans select sp.tag(\"\")", "a tag key is 1 to 63 bytes" },
		{ "from sp in spans select sp.tid", "field 'tid' is not available on spans" },
		{ "from sp in spans select sp.comm", "field 'comm' is not available on spans" },
		{ "from sp in spans select sp.arg(0)", "spans events have no arguments" },
		{ "from sp in spans select sp.tags(\"a\")", "unknown method 'tags' on the span" },
		{ "from sp in spans select str(sp.trace_id)", "str() reads a string at an address; spans have none" },
		{ "from sp in spans where sp.kind == 1 select count()", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct plan *p;
		struct query_opts o = { .sz = sizeof(o), .cluster = true };
		struct query *q = query_new("<t>", bad[i].q, strlen(bad[i].q), &o);

		ok(q && query_plan(q, &p) && query_error_msg(q) &&
		   (!bad[i].msg || strstr(query_error_msg(q), bad[i].msg)),
		   "%s: refused (%s)", bad[i].q, q && query_error_msg(q) ? query_error_msg(q) : "?");
		query_free(q);
	}
	{
		char text[2048];
		size_t n = (size_t)snprintf(text, sizeof(text), "from sp in spans select {");
		const struct plan *p;
		struct query *q;

		for (int i = 0; i <= QUERY_MAX_TAGS; i++)
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%st%d: sp.tag(\"k%d\")",
					      i ? ", " : "", i, i);
		snprintf(text + n, sizeof(text) - n, "}");
		q = query_new("<t>", text, strlen(text), NULL);
		p = NULL;
		if (q)
			query_plan(q, &p);
		ok(q && !p && query_error_msg(q) && strstr(query_error_msg(q), "at most 16 tag keys"),
		   "17 tag keys are refused");
		query_free(q);
	}
}

int main(void)
{
	test_fill();
	test_errors();
	return test_done();
}
