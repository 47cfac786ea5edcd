// SPDX-License-Identifier: MIT
/*
 * fay_current_span() (src/lib/current.c): the innermost recorded span
 * this thread began and has not ended; ends out of order, a span ended
 * by another thread, nesting deeper than the 8 tracked levels, unsampled
 * spans, and the version / size check.
 */
#include <pthread.h>

#include <fay/trace.h>

#include "libtest.h"

static struct fay_current cur;

/* The current span's name, "" for none (-ENOENT). */
static const char *now_name(void)
{
	int rc = fay_current_span(&cur, sizeof(cur), FAY_CURRENT_VERSION);

	return rc == 0 ? cur.name : rc == -ENOENT ? "" : "(error)";
}

static void *end_it(void *s)
{
	fay_span_end(s);
	return NULL;
}

static void *other(void *s)
{
	/* another thread sees none of this thread's spans */
	return (void *)(uintptr_t)(fay_current_span(&(struct fay_current){ 0 },
						    sizeof(struct fay_current),
						    FAY_CURRENT_VERSION) == -ENOENT);
}

int main(void)
{
	struct fay_span *a, *b, *c, *deep[10];
	char tp[FAY_TRACEPARENT_LEN];
	pthread_t t;
	void *r;

	lt_setup();
	setenv("FAY_POOL", "256", 1);
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_DISABLE");
	is_int(fay_init("cur", NULL, 0), 0, "fay_init");
	is_str(now_name(), "", "no span: -ENOENT");
	a = fay_span_root("outer");
	is_str(now_name(), "outer", "a root is current");
	fay_span_traceparent(a, tp, sizeof(tp));
	ok(cur.trace_lo && cur.span_id, "with its ids (%s)", tp);
	b = fay_span_child(a, "middle");
	c = fay_span_child(b, "a-name-of-seventy-bytes-is-cut-to-sixty-three-bytes-for-the-"
			   "current-span");
	is_str(now_name(), "a-name-of-seventy-bytes-is-cut-to-sixty-three-bytes-for-the-cur",
	       "the innermost, its name cut to 63 bytes");
	pthread_create(&t, NULL, other, NULL);
	pthread_join(t, &r);
	ok(r == (void *)1, "another thread has no current span");
	fay_span_end(b);
	is_str(now_name(), "a-name-of-seventy-bytes-is-cut-to-sixty-three-bytes-for-the-cur",
	       "ending a middle span leaves the innermost current");
	fay_span_end(c);
	is_str(now_name(), "outer", "then the outer one");
	b = fay_span_child(a, "handed-off");
	pthread_create(&t, NULL, end_it, b);
	pthread_join(t, NULL);
	is_str(now_name(), "outer", "a span ended by another thread is current no more");
	for (int i = 0; i < 10; i++) {
		char n[16];

		snprintf(n, sizeof(n), "deep%d", i);
		deep[i] = fay_span_child(i ? deep[i - 1] : a, n);
	}
	is_str(now_name(), "deep9", "10 more levels: the innermost");
	for (int i = 9; i >= 3; i--)
		fay_span_end(deep[i]);
	is_str(now_name(), "deep2", "8 levels tracked: back to deep2 after ending 7");
	fay_span_end(deep[2]);
	fay_span_end(deep[1]);
	is_str(now_name(), "", "deeper than 8: the outermost levels were forgotten");
	fay_span_end(deep[0]);
	fay_span_end(a);
	is_str(now_name(), "", "all ended: none");
	fay_set_sampling(0);
	a = fay_span_root("unsampled");
	is_str(now_name(), "", "an unsampled span is never current");
	fay_span_end(a);
	is_int(fay_current_span(&cur, sizeof(cur), 2), -EINVAL, "an unknown version: -EINVAL");
	is_int(fay_current_span(&cur, sizeof(cur) - 8, FAY_CURRENT_VERSION), -EINVAL,
	       "a wrong size: -EINVAL");
	lt_cleanup();
	return test_done();
}
