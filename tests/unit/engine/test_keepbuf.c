// SPDX-License-Identifier: MIT
/*
 * The keep buffer of keep mode (engine/keepbuf.h), with times given:
 *  - under its bounds every event is kept, in order, its bytes intact;
 *  - the count bound: 1000 events into 300 keep the newest 300, 700
 *    overwritten, exactly, and the ring wraps many times correctly;
 *  - the time bound: events older than DUR are dropped (expired, not
 *    overwritten), at an add and at a read;
 *  - a read's window [from, to] selects by arrival, both ends included;
 *  - a walk stops when its function says so;
 *  - the memory bound: without max, 16 MiB worth; never over 256 MiB;
 *  - bad arguments are refused.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "engine/keepbuf.h"

#define S 1000000000ull

struct rec {
	uint64_t i;
	char s[12];
};

struct seen {
	uint64_t n, first, last, t_first;
	int bad;		/* a record whose bytes are not its own */
	uint64_t stop_at;	/* stop after this many (0: never) */
};

static int on(void *ctx, const void *p, uint64_t t)
{
	struct seen *s = ctx;
	struct rec r;
	char want[12];

	memcpy(&r, p, sizeof(r));
	snprintf(want, sizeof(want), "e%llu", (unsigned long long)r.i);
	if (strcmp(r.s, want) || t != 1000 * S + r.i * 1000)
		s->bad++;
	if (!s->n) {
		s->first = r.i;
		s->t_first = t;
	}
	s->last = r.i;
	s->n++;
	return s->stop_at && s->n == s->stop_at;
}

/* Add events lo..hi-1, event i arriving at 1000 s + i us. */
static void add(struct keepbuf *k, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++) {
		struct rec r = { .i = i };

		snprintf(r.s, sizeof(r.s), "e%llu", (unsigned long long)i);
		keepbuf_add(k, &r, 1000 * S + i * 1000);
	}
}

int main(void)
{
	struct keepbuf_stats st;
	struct keepbuf *k;
	struct seen s;

	k = keepbuf_new(sizeof(struct rec), 60 * S, 300);
	ok(k != NULL, "a buffer of 300 events of 60 s");
	add(k, 0, 200);
	memset(&s, 0, sizeof(s));
	keepbuf_each(k, 0, UINT64_MAX, 1000 * S + 200 * 1000, on, &s, NULL);
	ok(s.n == 200 && s.first == 0 && s.last == 199 && !s.bad,
	   "200 of 300: all kept, oldest first, bytes and times intact");
	add(k, 200, 1000);
	memset(&s, 0, sizeof(s));
	keepbuf_each(k, 0, UINT64_MAX, 1000 * S + 1000 * 1000, on, &s, NULL);
	ok(s.n == 300 && s.first == 700 && s.last == 999 && !s.bad,
	   "1000 into 300: the newest 300 (700..999)");
	keepbuf_get_stats(k, 1000 * S + 1000 * 1000, &st);
	is_u64(st.overwritten, 700, "... 700 overwritten, exactly");
	is_u64(st.expired, 0, "... none expired");
	is_u64(st.added, 1000, "... 1000 added");
	is_u64(st.held, 300, "... 300 held");
	is_u64(st.oldest_ns, 1000 * S + 700 * 1000, "... the oldest's arrival");

	memset(&s, 0, sizeof(s));
	keepbuf_each(k, 1000 * S + 800 * 1000, 1000 * S + 809 * 1000, 1000 * S + 1000 * 1000, on,
		     &s, NULL);
	ok(s.n == 10 && s.first == 800 && s.last == 809, "a window [800, 809]: 10, both ends in");
	memset(&s, 0, sizeof(s));
	s.stop_at = 5;
	ok(keepbuf_each(k, 0, UINT64_MAX, 1000 * S + 1000 * 1000, on, &s, NULL) == 1 && s.n == 5,
	   "a walk stops when its function returns non-zero, and returns it");

	/* event i arrived at 1000 s + i us: at 1060 s + 900 us, those before
	 * 1000 s + 900 us (700..899) are older than 60 s */
	keepbuf_get_stats(k, 1060 * S + 900 * 1000, &st);
	is_u64(st.held, 100, "60 s on: the events older than 60 s dropped (900..999 left)");
	is_u64(st.expired, 200, "... 200 expired");
	is_u64(st.overwritten, 700, "... overwritten unchanged");
	memset(&s, 0, sizeof(s));
	keepbuf_each(k, 0, UINT64_MAX, 1061 * S, on, &s, NULL);
	ok(s.n == 0, "61 s on: nothing is left to read");
	keepbuf_free(k);

	k = keepbuf_new(sizeof(struct rec), S, 0);
	keepbuf_get_stats(k, 0, &st);
	is_u64(st.bytes, (16u << 20) / 32 * 32, "without max: 16 MiB worth (32-byte entries)");
	keepbuf_free(k);
	k = keepbuf_new(sizeof(struct rec), S, 100000000);
	keepbuf_get_stats(k, 0, &st);
	ok(k && st.bytes <= (256u << 20) && st.cap == (256u << 20) / 32,
	   "max 100M: cut to 256 MiB worth");
	keepbuf_free(k);
	errno = 0;
	ok(!keepbuf_new(0, S, 10) && errno == EINVAL, "a record of 0 bytes: refused");
	ok(!keepbuf_new(8, 0, 10) && errno == EINVAL, "a time bound of 0: refused");
	keepbuf_free(NULL);
	return test_done();
}
