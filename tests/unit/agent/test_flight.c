// SPDX-License-Identifier: MIT
/*
 * The flight buffer (src/agent/flight.c): spans kept within the bound,
 * the oldest dropped first and counted, a capture by trace id returns
 * exactly the spans of that trace still held, one by time exactly those
 * overlapping the window (and of the service asked), the process's
 * endpoint added to spans without one.
 */
#include <errno.h>
#include <string.h>

#include "agent/flight.h"
#include "test.h"

/* A span of trace (0, trace), started at start, lasting 10, with a pad
 * tag of pad bytes; service: its own endpoint (NULL: none). */
static uint32_t mkspan(uint8_t *buf, size_t cap, uint64_t trace, uint64_t id, uint64_t start,
		       const char *service, size_t pad)
{
	struct spanrec_fixed f = { .trace_lo = trace, .span_id = id, .start_ns = start,
				   .duration_ns = 10 };
	static char big[2048];
	size_t off = 0;

	memset(big, 'x', sizeof(big));
	spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_NAME, 0, "op", 2, NULL, 0);
	f.nitems = 1;
	if (service) {
		spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_LOCAL_EP, 80, service,
				 strlen(service), "1.2.3.4", 7);
		f.nitems++;
	}
	spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_TAG, 0, "pad", 3, big, pad);
	f.nitems++;
	f.items_len = (uint32_t)off;
	memcpy(buf, &f, sizeof(f));
	return (uint32_t)(64 + off);
}

static void add(struct flight *f, uint64_t trace, uint64_t id, uint64_t start,
		const char *service, const struct ep_item *ep)
{
	uint8_t buf[4096];
	uint32_t n = mkspan(buf, sizeof(buf), trace, id, start, service, 200);
	struct spanrec r;

	if (spanrec_decode(buf, n, &r, NULL, 0) < 0)
		diag("test span does not decode");
	flight_add(f, buf, n, &r, ep, NULL);
}

struct seen {
	unsigned n, bad, with_ep, svc_own;
	uint64_t trace_mask;	/* traces seen, bit trace % 64 */
	uint64_t max_id, min_id;
};

static int see(void *ctx, const void *rec, uint32_t len)
{
	struct seen *s = ctx;
	struct spanrec r;

	if (spanrec_decode(rec, len, &r, NULL, 0) != (int)len) {
		s->bad++;
		return 0;
	}
	s->n++;
	s->trace_mask |= 1ull << (r.f.trace_lo % 64);
	if (r.f.span_id > s->max_id)
		s->max_id = r.f.span_id;
	if (!s->min_id || r.f.span_id < s->min_id)
		s->min_id = r.f.span_id;
	if (r.local.present && r.local.service.len == 3 && !memcmp(r.local.service.p, "ep!", 3))
		s->with_ep++;
	if (r.local.present && r.local.service.len == 3 && !memcmp(r.local.service.p, "own", 3))
		s->svc_own++;
	return 0;
}

static uint64_t lost;	/* the last capture's */

static long capture(struct flight *f, const struct wire_capture *c, struct seen *s,
		    struct flight_stats *st, int *cut, uint64_t max)
{
	struct wbuf w = { 0 };
	char err[256];
	long n = flight_capture(f, c, &w, max, cut, &lost, st);

	memset(s, 0, sizeof(*s));
	if (n >= 0 && wire_batch_walk(w.p, (uint32_t)w.len, see, s, err, sizeof(err)) != n)
		n = -EBADMSG;
	wbuf_free(&w);
	return n;
}

int main(void)
{
	struct flight *f = flight_new(FLIGHT_MIN_BYTES);
	struct wire_capture c = { .kind = WIRE_CK_TRACE };
	struct flight_stats st;
	struct ep_item ep;
	struct seen s;
	int cut;
	long n;
	uint64_t id = 0, dropped;

	ok(flight_new(FLIGHT_MIN_BYTES - 1) == NULL && errno == EINVAL,
	   "a buffer below the minimum: refused");
	ok(f != NULL, "a buffer of 1 MiB");
	ep_item_init(&ep, "ep!", "10.0.0.1", 7);

	/* 100 spans of 10 traces: nothing dropped yet */
	for (unsigned i = 0; i < 100; i++)
		add(f, 1 + i % 10, ++id, 1000 + i * 100, (i + i / 10) % 2 ? "own" : NULL, &ep);
	flight_get_stats(f, &st);
	ok(st.held == 100 && st.added == 100 && !st.dropped, "100 spans held, none dropped");
	ok(st.oldest_ns == 1000, "... the oldest starts at 1000");
	c.trace_lo = 3;
	n = capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
	is_int((int)n, 10, "trace 3: its 10 spans");
	is_int((int)lost, 0, "... none of them overwritten");
	ok(s.trace_mask == 1ull << 3 && !s.bad && !cut, "... of that trace only, whole");
	is_int((int)s.with_ep, 5, "... the process's endpoint added to those without one");
	is_int((int)s.svc_own, 5, "... and not to those with their own");
	c.trace_lo = 77;
	is_int((int)capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX), 0, "a trace not held: none");

	/* by time: spans 20..29 start at 3000..3900 and last 10 */
	c = (struct wire_capture){ .kind = WIRE_CK_WINDOW, .from_ns = 3000, .to_ns = 3905 };
	n = capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
	is_int((int)n, 10, "the window [3000, 3905]: 10 spans");
	ok(s.min_id == 21 && s.max_id == 30, "... exactly those that overlap it");
	c.service = "own";
	c.service_len = 3;
	is_int((int)capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX), 5,
	       "... of service own: 5");
	c.service = "ep!";
	is_int((int)capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX), 5,
	       "... of the process's service: 5");
	c.service = NULL;
	c.service_len = 0;
	n = capture(f, &c, &s, &st, &cut, 3 * 300);
	ok(n > 0 && n < 10 && cut, "a capture larger than the room asked for: cut, said so");
	ok(s.max_id == 30, "... the newest kept");

	/* fill it many times over: the oldest go, counted */
	for (unsigned i = 0; i < 20000; i++)
		add(f, 1000 + i / 4, ++id, 100000 + i, NULL, &ep);
	flight_get_stats(f, &st);
	ok(st.dropped > 0 && st.held + st.dropped == st.added, "full: the oldest dropped, "
	   "held + dropped == added (%llu + %llu)", (unsigned long long)st.held,
	   (unsigned long long)st.dropped);
	ok(st.used <= FLIGHT_MIN_BYTES, "... within the bound (%llu bytes used)",
	   (unsigned long long)st.used);
	c = (struct wire_capture){ .kind = WIRE_CK_TRACE, .trace_lo = 3 };
	is_int((int)capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX), 0,
	       "trace 3, overwritten: none (the index never returns a dropped span)");

	c.trace_lo = 1000 + 19999 / 4;
	is_int((int)capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX), 4,
	       "the newest trace: its 4 spans");
	is_int((int)lost, 0, "... none overwritten");
	{
		/* trace 500: 40 spans, then more until the buffer has lost
		 * some of them: held + overwritten is its 40, exactly */
		unsigned more = 0;
		long h = 40;

		for (unsigned i = 0; i < 40; i++)
			add(f, 500, ++id, 200000 + i, NULL, &ep);
		c = (struct wire_capture){ .kind = WIRE_CK_TRACE, .trace_lo = 500 };
		for (; h == 40 && more < 40000; more++) {
			add(f, 30000 + more / 4, ++id, 300000 + more, NULL, &ep);
			h = capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
		}
		for (unsigned i = 0; i < 20; i++, more++)
			add(f, 30000 + more / 4, ++id, 300000 + more, NULL, &ep);
		h = capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
		ok(h > 0 && h < 40 && h + (long)lost == 40,
		   "trace 500 partly evicted: %ld held + %llu already overwritten == 40", h,
		   (unsigned long long)lost);
		c.trace_lo = 30000 + (more - 1) / 4;
		capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
		is_int((int)lost, 0, "... the newest trace: none overwritten");
	}
	c = (struct wire_capture){ .kind = WIRE_CK_WINDOW, .from_ns = 0, .to_ns = UINT64_MAX };
	n = capture(f, &c, &s, &st, &cut, WIRE_CAPTURE_MAX);
	ok(n == (long)st.held && !s.bad, "everything: every span held (%ld), all well formed", n);
	dropped = st.dropped;

	/* a span larger than a quarter of the buffer is not kept */
	{
		static uint8_t big[FLIGHT_MIN_BYTES / 2];
		static char val[60000];
		struct spanrec_fixed fx = { .trace_lo = 5, .span_id = 1, .items_len = 0 };
		struct spanrec r;
		size_t off = 0;

		for (int i = 0; i < 5; i++)
			spanrec_put_item(big + 64, sizeof(big) - 64, &off, SPAN_ITEM_TAG, 0, "k", 1,
					 val, sizeof(val));
		fx.nitems = 5;
		fx.items_len = (uint32_t)off;
		memcpy(big, &fx, sizeof(fx));
		ok(spanrec_decode(big, 64 + off, &r, NULL, 0) > 0, "a span of %zu bytes", 64 + off);
		flight_add(f, big, (uint32_t)(64 + off), &r, NULL, NULL);
		flight_get_stats(f, &st);
		ok(st.too_big == 1 && st.dropped == dropped, "... not kept, counted; nothing evicted");
	}
	flight_free(f);
	flight_free(NULL);
	return test_done();
}
