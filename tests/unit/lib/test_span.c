// SPDX-License-Identifier: MIT
/*
 * libfay spans, read back the way the agent reads them: the shm file is
 * found by name and mapped read-only, its rings are drained with the ring
 * consumer and every record goes through spanrec_decode().
 *
 * Covers: the file (name, mode, header, no temporary left behind), ids and
 * parent links, items, traceparent out and in (and the malformed cases),
 * unsampled spans (nothing recorded, context propagated), 1/N sampling
 * within binomial bounds, rate sampling near its target, truncation,
 * pool exhaustion, threads (a ring each, spans ended on another thread,
 * rings released and reused, every ring taken), the recursion guard and
 * signal handlers, fork (the child gets its own file).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fay/trace.h>

#include "common/clock.h"
#include "lib/libfay.h"
#include "libtest.h"

static struct lt_view view;

static uint64_t span_id_of(const struct fay_span *s)
{
	char tp[FAY_TRACEPARENT_LEN];
	uint64_t hi, lo, id;
	unsigned f;

	if (fay_span_traceparent(s, tp, sizeof(tp)) != 55 || lt_tp(tp, &hi, &lo, &id, &f))
		return 0;
	return id;
}

static void tp_of(const struct fay_span *s, uint64_t *hi, uint64_t *lo,
		  uint64_t *id, unsigned *flags)
{
	char tp[FAY_TRACEPARENT_LEN];

	*hi = *lo = *id = 0;
	*flags = 0xff;
	if (fay_span_traceparent(s, tp, sizeof(tp)) == 55)
		lt_tp(tp, hi, lo, id, flags);
}

static void test_file(void)
{
	char path[PATH_MAX], *base;
	struct stat st;
	unsigned long long inst;
	char tail[8];

	is_int(lt_find(getpid(), path, sizeof(path)), 1, "one shm file for this pid");
	base = strrchr(path, '/') + 1;
	ok(sscanf(base, FAY_SHM_PREFIX "%*d-%16llx%7s", &inst, tail) == 2 &&
	   !strcmp(tail, FAY_SHM_SUFFIX) && strlen(base) == strlen(FAY_SHM_PREFIX) +
	   (size_t)snprintf(NULL, 0, "%d", (int)getpid()) + 1 + 16 + strlen(FAY_SHM_SUFFIX),
	   "name is fay-<pid>-<16 hex>.shm (%s)", base);
	ok(!stat(path, &st) && (st.st_mode & 07777) == 0600, "mode 0600 (%o)",
	   (unsigned)(st.st_mode & 07777));
	is_int(lt_count(".fay-tmp", NULL, 0), 0, "no temporary file left");
	if (lt_map(path, &view)) {
		ok(0, "map the file read-only");
		exit(test_done());
	}
	is_u64(view.hdr->magic, FAY_SHM_MAGIC, "magic");
	is_int(view.hdr->version, FAY_SHM_VERSION, "version");
	is_int(view.hdr->state, FAY_SHM_LIVE, "state LIVE");
	is_int(view.hdr->pid, getpid(), "pid");
	is_u64(view.hdr->file_size, st.st_size, "file_size is the file's size");
	is_u64(view.hdr->instance, inst, "instance is the name's hex");
	is_int(view.hdr->nrings, 4, "FAY_RINGS=4");
	is_int(view.hdr->ring_slots, 1024 * 1024 / FAY_SLOT_SIZE, "FAY_RING_KB=1024");
	is_int(view.hdr->npool, 256, "FAY_POOL=256");
	is_int(view.hdr->pool_stride, 1024, "pool stride 1024");
	is_str(view.hdr->service, "svc", "service");
	is_str(view.hdr->ip, "10.0.0.7", "ip");
	is_int(view.hdr->port, 7001, "port");
	ok(view.hdr->rings_off >= view.hdr->pool_off + 256 * 1024 &&
	   view.hdr->rings_off + 4 * view.hdr->ring_stride <= view.hdr->file_size,
	   "pool and rings inside the file");
	/* docs/ABI.md 1.2.1: header and pool reserved, rings when claimed */
	ok((uint64_t)st.st_blocks * 512 >= view.hdr->rings_off &&
	   (uint64_t)st.st_blocks * 512 < view.hdr->rings_off + view.hdr->ring_stride,
	   "header and pool reserved (%llu bytes), no ring yet: %lld bytes allocated of %lld",
	   (unsigned long long)view.hdr->rings_off, (long long)st.st_blocks * 512,
	   (long long)st.st_size);

	is_int(fay_init("svc2", "::1", 9), 0, "fay_init again");
	is_str(view.hdr->service, "svc2", "... updates the service");
	is_str(view.hdr->ip, "::1", "... and the ip");
	is_int(view.hdr->port, 9, "... and the port");
	is_int(lt_find(getpid(), NULL, 0), 1, "... and makes no second file");
	fay_init("svc", "10.0.0.7", 7001);
}

static void test_basic(void)
{
	struct lt_spans sp;
	struct spanrec_item it;
	struct fay_span *root, *child, *grand;
	uint64_t t0 = clock_realtime_ns(), t1, rid, cid, gid, hi, lo, id, started;
	const struct lt_span *r, *c, *g;
	unsigned f;

	lib_flush_counters();    /* spans_started is added in per-thread batches */
	started = view.hdr->spans_started;
	root = fay_span_root("write");
	ok(root != NULL, "root span");
	fay_span_tag(root, "object", "rbd.0001");
	fay_span_event(root, "queued");
	fay_span_tag_int(root, "offset", -4096);
	child = fay_span_child(root, "journal");
	grand = fay_span_child(child, "fsync");
	rid = span_id_of(root);
	cid = span_id_of(child);
	gid = span_id_of(grand);
	tp_of(root, &hi, &lo, &id, &f);
	is_int(f, 1, "sampled root: traceparent flags 01");
	fay_span_end(grand);
	fay_span_end(child);
	fay_span_end(root);
	t1 = clock_realtime_ns();
	lib_flush_counters();
	is_u64(view.hdr->spans_started - started, 3, "spans_started counts 3");

	lt_read_all(&view, &sp);
	is_int(sp.n, 3, "three records");
	is_int(sp.bad, 0, "all decode");
	r = lt_by_id(&sp, rid);
	c = lt_by_id(&sp, cid);
	g = lt_by_id(&sp, gid);
	ok(r && c && g, "records found by span id");
	if (!r || !c || !g) {
		lt_spans_free(&sp);
		return;
	}
	ok(hi && lo && r->r.f.trace_hi == hi && r->r.f.trace_lo == lo,
	   "128-bit trace id as in the traceparent");
	ok(c->r.f.trace_hi == hi && c->r.f.trace_lo == lo &&
	   g->r.f.trace_hi == hi && g->r.f.trace_lo == lo, "children share the trace id");
	is_u64(r->r.f.parent_id, 0, "root has no parent");
	is_u64(c->r.f.parent_id, rid, "child's parent is the root");
	is_u64(g->r.f.parent_id, cid, "grandchild's parent is the child");
	ok(rid != cid && cid != gid && rid != gid, "distinct span ids");
	ok(lt_streq(r->r.name, "write") && lt_streq(c->r.name, "journal") &&
	   lt_streq(g->r.name, "fsync"), "names");
	is_int(r->r.f.flags, SPAN_F_SAMPLED, "flags: sampled only");
	ok(r->r.f.start_ns >= t0 && r->r.f.start_ns + r->r.f.duration_ns <= t1,
	   "start and duration within the test's clock readings");
	ok(c->r.f.start_ns >= r->r.f.start_ns &&
	   c->r.f.start_ns + c->r.f.duration_ns <= r->r.f.start_ns + r->r.f.duration_ns,
	   "child inside its parent");
	is_int(r->r.nevents, 1, "one event");
	is_int(r->r.ntags, 2, "two tags");
	ok(lt_item(&r->r, SPAN_ITEM_TAG, 0, &it) && lt_streq(it.a, "object") &&
	   lt_streq(it.b, "rbd.0001"), "string tag");
	ok(lt_item(&r->r, SPAN_ITEM_EVENT, 0, &it) && lt_streq(it.a, "queued") &&
	   it.val >= r->r.f.start_ns && it.val <= r->r.f.start_ns + r->r.f.duration_ns,
	   "event with its timestamp inside the span");
	ok(lt_item(&r->r, SPAN_ITEM_TAG_INT, 0, &it) && lt_streq(it.a, "offset") &&
	   (int64_t)it.val == -4096, "integer tag");
	ok(r->ring == c->ring && c->ring == g->ring, "one thread, one ring");
	is_u64(sp.lost + sp.corrupt, 0, "consumer saw no loss or corruption");
	lt_spans_free(&sp);

	/* NULL is always harmless */
	fay_span_event(NULL, "x");
	fay_span_tag(NULL, "k", "v");
	fay_span_tag_int(NULL, "k", 1);
	fay_span_end(NULL);
	ok(fay_span_child(NULL, "x") == NULL, "child of NULL is NULL");
	{
		char tp[FAY_TRACEPARENT_LEN];
		struct fay_span *s = fay_span_root("n");

		is_int(fay_span_traceparent(NULL, tp, sizeof(tp)), -EINVAL,
		       "traceparent of NULL: -EINVAL");
		is_int(fay_span_traceparent(s, tp, 20), -ENOSPC, "short buffer: -ENOSPC");
		fay_span_end(s);
	}
}

static void test_traceparent(void)
{
	static const char *bad[] = {
		NULL, "",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
		"00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-B7AD6B7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
	};
	static const char *good[] = {
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-holds",
		"  00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03\t",
	};
	struct lt_spans sp;
	uint64_t before = view.hdr->bad_traceparent, n0 = lt_records(&view);
	uint64_t hi, lo, id;
	unsigned f, nbad = 0;
	char tp[FAY_TRACEPARENT_LEN], tp2[FAY_TRACEPARENT_LEN];
	struct fay_span *root, *srv;

	/* round trip: root -> header -> remote span in "another process" */
	root = fay_span_root("client");
	is_int(fay_span_traceparent(root, tp, sizeof(tp)), 55, "traceparent is 55 chars");
	ok(!lt_tp(tp, &hi, &lo, &id, &f), "traceparent well formed, lower case: %s", tp);
	srv = fay_span_remote(tp, "server");
	fay_span_traceparent(srv, tp2, sizeof(tp2));
	ok(!memcmp(tp, tp2, 35) && memcmp(tp + 36, tp2 + 36, 16), "remote span: same trace, new span id");
	fay_span_end(srv);
	fay_span_end(root);
	lt_read_all(&view, &sp);
	{
		const struct lt_span *s;
		uint64_t sid = 0;

		spanrec_parse_id(tp2 + 36, 16, &sid);
		s = lt_by_id(&sp, sid);
		ok(s && s->r.f.parent_id == id && s->r.f.trace_hi == hi && s->r.f.trace_lo == lo,
		   "remote span's parent is the sender's span, same trace");
	}
	lt_spans_free(&sp);

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct fay_span *s = fay_span_remote(bad[i], "bad");
		uint64_t h2, l2, i2;

		tp_of(s, &h2, &l2, &i2, &f);
		ok(h2 != 0x0af7651916cd43ddull && i2 != 0xb7ad6b7169203331ull,
		   "bad header %zu (%s) starts a new trace", i, bad[i] ? bad[i] : "NULL");
		nbad++;
		fay_span_end(s);
	}
	is_u64(view.hdr->bad_traceparent - before, nbad, "bad headers counted");
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct fay_span *s = fay_span_remote(good[i], "good");
		uint64_t h2, l2, i2;

		tp_of(s, &h2, &l2, &i2, &f);
		ok(h2 == 0x0af7651916cd43ddull && l2 == 0x8448eb211c80319cull &&
		   i2 != 0xb7ad6b7169203331ull && f == 1,
		   "accepted: '%s' (continues the trace, flags out 01)", good[i]);
		fay_span_end(s);
	}
	is_u64(view.hdr->bad_traceparent - before, nbad, "good headers not counted as bad");

	/* unsampled upstream: not recorded here, context carries on */
	n0 = lt_records(&view);
	srv = fay_span_remote("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "u");
	fay_span_event(srv, "e");
	tp_of(srv, &hi, &lo, &id, &f);
	ok(hi == 0x0af7651916cd43ddull && f == 0 && id != 0xb7ad6b7169203331ull && id,
	   "unsampled remote: same trace, own span id, flags 00");
	root = fay_span_child(srv, "c");
	tp_of(root, &hi, &lo, &id, &f);
	ok(hi == 0x0af7651916cd43ddull && f == 0, "its child: same trace, unsampled");
	fay_span_end(root);
	fay_span_end(srv);
	is_u64(lt_records(&view) - n0, 0, "nothing recorded for an unsampled upstream");
}

/* The traceparent writer and reader against a plain reference: every
 * nibble value at every digit position, then random ids and flags:
 * lib_tp_format() (16 digits at once with SSE2) must write what snprintf
 * writes, and lib_tp_parse() must give back the ids and flags. */
static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static void test_tp_digits(void)
{
	char got[FAY_TRACEPARENT_LEN + 8], want[FAY_TRACEPARENT_LEN + 8];
	uint64_t x = 42, nfmt = 0, nparse = 0, n = 0;

	for (unsigned i = 0; i < 256 + 200000; i++) {
		uint64_t hi = splitmix(&x), lo = splitmix(&x), id = splitmix(&x);
		uint64_t h2, l2, i2;
		uint8_t f = (uint8_t)splitmix(&x), f2;

		if (i < 256) {
			/* nibble value i & 15 at position i >> 4 of each id */
			uint64_t m = UINT64_C(0xf) << (4 * (i >> 4));

			hi = (hi & ~m) | ((uint64_t)(i & 15) << (4 * (i >> 4)));
			lo = (lo & ~m) | ((uint64_t)(i & 15) << (4 * (i >> 4)));
			id = (id & ~m) | ((uint64_t)(i & 15) << (4 * (i >> 4)));
		}
		memset(got, 'x', sizeof(got));
		snprintf(want, sizeof(want), "00-%016" PRIx64 "%016" PRIx64 "-%016" PRIx64 "-%02x",
			 hi, lo, id, f);
		if (lib_tp_format(got, sizeof(got), hi, lo, id, f) != 55 ||
		    memcmp(got, want, 56) || got[56] != 'x')
			nfmt++;
		if ((hi || lo) && id &&
		    (lib_tp_parse(want, &h2, &l2, &i2, &f2) || h2 != hi || l2 != lo ||
		     i2 != id || f2 != f))
			nparse++;
		n++;
	}
	is_u64(nfmt, 0, "traceparent writer: %" PRIu64 " ids as snprintf writes them", n);
	is_u64(nparse, 0, "traceparent reader: the same %" PRIu64 " read back", n);
}

/* The reader's length test (aligned 16-byte loads) at every alignment
 * and length around 55, each string ending on the last byte of a page
 * whose next page is not mapped (a read past the NUL's page would
 * crash): a prefix of a good header is refused, the whole one accepted,
 * a longer version-00 one refused, a longer version-01 one accepted. */
static void test_tp_lengths(void)
{
	static const char good[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned wrong = 0, n = 0;

	if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE)) {
		ok(0, "test_tp_lengths: mmap: %s", strerror(errno));
		return;
	}
	for (unsigned ver = 0; ver < 2; ver++) {
		for (unsigned len = 0; len <= 72; len++) {
			for (unsigned end = 0; end < 16; end++) {
				/* the NUL at m + pg - 1 - end */
				char *s = m + pg - 1 - end - len;
				uint64_t hi, lo, id;
				uint8_t f;
				int want, got;

				for (unsigned i = 0; i < len; i++)
					s[i] = i < 55 ? good[i] : "-x"[(i - 55) & 1];
				if (len > 1)
					s[1] = ver ? '1' : '0';
				s[len] = '\0';
				want = len == 55 || (ver && len > 55) ? 0 : -EINVAL;
				got = lib_tp_parse(s, &hi, &lo, &id, &f);
				if (got != want || (!got && (hi != 0x0af7651916cd43ddull ||
							      lo != 0x8448eb211c80319cull ||
							      id != 0xb7ad6b7169203331ull || f != 1)))
					wrong++;
				n++;
			}
		}
	}
	is_int(wrong, 0, "traceparent reader: %u lengths and alignments at a page's end", n);
	munmap(m, (size_t)pg * 2);
}

static void test_unsampled(void)
{
	/* the thread has LIB_NR_HANDLES non-recording handles: the roots
	 * and one child in flight at once */
	enum { NR = LIB_NR_HANDLES - 1 };
	struct fay_span *r[NR], *c;
	uint64_t hi[NR], lo[NR], id[NR];
	uint64_t h, l, i, n0 = lt_records(&view), u0;
	unsigned f;
	int same = 1;

	lib_flush_counters();
	u0 = view.hdr->spans_unsampled;
	fay_set_sampling(0);
	for (unsigned k = 0; k < NR; k++) {
		r[k] = fay_span_root("u");
		ok(r[k] != NULL, "unsampled root %u is a handle", k);
	}
	for (unsigned k = 0; k < NR; k++) {
		unsigned fl;

		tp_of(r[k], &hi[k], &lo[k], &id[k], &fl);
		if (fl != 0 || !hi[k] || !id[k])
			same = 0;
	}
	ok(same, "unsampled roots have ids and flags 00");
	ok(hi[0] != hi[1] && id[0] != id[1], "distinct traces");
	c = fay_span_child(r[0], "child");
	tp_of(c, &h, &l, &i, &f);
	ok(h == hi[0] && l == lo[0] && i != id[0] && f == 0,
	   "child of unsampled: same trace id, own span id, unsampled");
	fay_span_event(c, "e");
	fay_span_tag(c, "k", "v");
	fay_span_end(c);
	for (unsigned k = 0; k < NR; k++) {
		tp_of(r[k], &h, &l, &i, &f);
		if (h != hi[k] || l != lo[k] || i != id[k])
			same = 0;
	}
	ok(same, "%u unsampled traces and a child in flight on one thread keep their ids",
	   NR);
	for (unsigned k = 0; k < NR; k++) {
		fay_span_tag(r[k], "k", "v");
		fay_span_end(r[k]);
	}
	is_u64(lt_records(&view) - n0, 0, "unsampled spans record nothing");
	lib_flush_counters();
	is_u64(view.hdr->spans_unsampled - u0, NR, "spans_unsampled counts the roots");
	fay_set_sampling(1);
}

static void test_sampling(void)
{
	const unsigned n = 20000, one_in = 10;
	uint64_t n0 = lt_records(&view), k, t_end, tries = 0;
	double mean = (double)n / one_in, sd = sqrt(n * (1.0 / one_in) * (1 - 1.0 / one_in));

	fay_set_sampling(one_in);
	is_int(view.hdr->sample_one_in, one_in, "sample_one_in published");
	for (unsigned i = 0; i < n; i++)
		fay_span_end(fay_span_root("s"));
	k = lt_records(&view) - n0;
	ok(fabs((double)k - mean) < 5 * sd, "1 in %u of %u: %" PRIu64 " sampled, want %.0f +- %.0f (5 sd)",
	   one_in, n, k, mean, 5 * sd);

	/* 1 in N, N >= 64: geometric gaps passed from the thread's skip
	 * budget; the same law, and every root counted one way or the
	 * other */
	{
		const unsigned big_n = 1000000, big_in = 500;
		double bm = (double)big_n / big_in,
		       bsd = sqrt(big_n * (1.0 / big_in) * (1 - 1.0 / big_in));
		uint64_t u0;

		lib_flush_counters();
		u0 = view.hdr->spans_unsampled;
		fay_set_sampling(big_in);
		n0 = lt_records(&view);
		for (unsigned i = 0; i < big_n; i++)
			fay_span_end(fay_span_root("g"));
		k = lt_records(&view) - n0;
		ok(fabs((double)k - bm) < 5 * bsd,
		   "1 in %u of %u: %" PRIu64 " sampled, want %.0f +- %.0f (5 sd)",
		   big_in, big_n, k, bm, 5 * bsd);
		lib_flush_counters();
		is_u64(view.hdr->spans_unsampled - u0 + k, big_n,
		       "1 in %u: sampled + spans_unsampled = the roots", big_in);
		/* a change of sampling voids the thread's budget at once */
		fay_set_sampling(4294967295u);
		for (unsigned i = 0; i < 100; i++)
			fay_span_end(fay_span_root("g"));
		fay_set_sampling(1);
		n0 = lt_records(&view);
		fay_span_end(fay_span_root("g"));
		is_u64(lt_records(&view) - n0, 1, "1 in 2^32-1 then 1: the next root is sampled");
		fay_set_sampling(0);
		n0 = lt_records(&view);
		for (unsigned i = 0; i < 5000; i++)
			fay_span_end(fay_span_root("g"));
		is_u64(lt_records(&view) - n0, 0, "then 0: 5000 roots, none sampled");
	}

	/* rate mode: about 2000 a second (burst 200) for 0.5 s */
	fay_set_sampling_rate(2000);
	n0 = lt_records(&view);
	t_end = clock_monotonic_ns() + 500000000ull;
	while (clock_monotonic_ns() < t_end) {
		fay_span_end(fay_span_root("r"));
		tries++;
	}
	k = lt_records(&view) - n0;
	ok(tries > 5000, "rate test offered %" PRIu64 " roots", tries);
	ok(k >= 700 && k <= 1400, "rate:2000 for 0.5 s sampled %" PRIu64 " (want ~1000-1200)", k);
	fay_set_sampling_rate(0);
	n0 = lt_records(&view);
	fay_span_end(fay_span_root("none"));
	is_u64(lt_records(&view) - n0, 0, "rate 0 samples nothing");
	fay_set_sampling(1);
}

static void test_truncation(void)
{
	struct lt_spans sp;
	struct fay_span *s = fay_span_root("big");
	uint64_t tr0 = view.hdr->truncated, id = span_id_of(s);
	const struct lt_span *r;
	char key[16];
	unsigned fit = 0, total = 200;
	size_t room = 1024 - sizeof(struct fay_pool_slot) - (SPANREC_ITEM_HDR + 3);

	/* each tag: 6 + "k%03u" (4) + 20-byte value = 30 bytes */
	for (unsigned i = 0; i < total; i++) {
		snprintf(key, sizeof(key), "k%03u", i);
		fay_span_tag(s, key, "01234567890123456789");
	}
	fit = (unsigned)(room / 30);
	fay_span_event(s, "after-full");
	fay_span_end(s);
	lt_read_all(&view, &sp);
	r = lt_by_id(&sp, id);
	ok(r != NULL, "truncated span still recorded");
	if (r) {
		ok(r->r.f.flags & SPAN_F_TRUNCATED, "SPAN_F_TRUNCATED set");
		is_int(r->r.ntags, fit, "the tags that fit are kept");
		is_int(r->r.f.dropped_items, total - fit + 1, "dropped_items counts the rest");
		ok(lt_streq(r->r.name, "big"), "name kept");
	}
	is_u64(view.hdr->truncated - tr0, 1, "hdr->truncated once per span");
	lt_spans_free(&sp);
}

static void test_pool(void)
{
	const unsigned np = view.hdr->npool, N = np + 6;
	struct fay_span **s = calloc(N, sizeof(*s));
	uint64_t lost0 = view.hdr->lost_no_handle, n0 = lt_records(&view);
	unsigned nrec = 0, nonrec_ok = 1;

	for (unsigned i = 0; i < N; i++)
		s[i] = fay_span_root("p");
	for (unsigned i = 0; i < N; i++) {
		uint64_t h, l, id;
		unsigned f;

		if (((struct fay_pool_slot *)s[i])->state == FAY_POOL_OPEN) {
			nrec++;
			continue;
		}
		tp_of(s[i], &h, &l, &id, &f);
		if (!h || !id || f != 1)
			nonrec_ok = 0;
	}
	is_int(nrec, np, "%u handles in a pool of %u (one thread)", np, np);
	is_u64(view.hdr->lost_no_handle - lost0, N - np, "the rest counted in lost_no_handle");
	ok(nonrec_ok, "the spans without a handle still propagate (sampled, ids)");
	for (unsigned i = 0; i < N; i++)
		fay_span_end(s[i]);
	is_u64(lt_records(&view) - n0, np, "the %u recorded", np);
	s[0] = fay_span_root("again");
	ok(((struct fay_pool_slot *)s[0])->state == FAY_POOL_OPEN, "handles come back");
	fay_span_end(s[0]);
	free(s);
}

/* ---- threads ---------------------------------------------------------- */

#define NTHR 3
#define PER_THREAD 200
#define HANDOFF 20

static pthread_barrier_t bar;
static struct fay_span *handoff[NTHR][HANDOFF];
static uint64_t handoff_id[NTHR][HANDOFF];

static void *worker(void *arg)
{
	long t = (long)arg;

	for (int i = 0; i < PER_THREAD; i++) {
		struct fay_span *s = fay_span_root("w");

		fay_span_tag_int(s, "thread", t);
		fay_span_tag_int(s, "i", i);
		fay_span_end(s);
	}
	for (int i = 0; i < HANDOFF; i++) {
		/* begun here, ended by the next thread */
		handoff[t][i] = fay_span_root("handoff");
		handoff_id[t][i] = span_id_of(handoff[t][i]);
	}
	pthread_barrier_wait(&bar);
	for (int i = 0; i < HANDOFF; i++)
		fay_span_end(handoff[(t + 1) % NTHR][i]);
	pthread_barrier_wait(&bar);
	return NULL;
}

static void *hold_ring(void *arg)
{
	fay_span_end(fay_span_root("hold"));
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	(void)arg;
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[NTHR + 1];
	struct lt_spans sp;
	uint32_t ring_of[NTHR];
	int per_thread_ok = 1, ended_elsewhere = 1, found = 1;
	uint64_t lost0;
	unsigned owned = 0;

	pthread_barrier_init(&bar, NULL, NTHR);
	for (long t = 0; t < NTHR; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&bar);
	for (uint32_t i = 0; i < view.hdr->nrings; i++)
		if (lt_ctl(&view, i)->owner_tid)
			owned++;
	is_int(owned, 1, "threads gave their rings back at exit (only main's is owned)");

	lt_read_all(&view, &sp);
	is_int(sp.bad + sp.corrupt, 0, "all records intact");
	for (int t = 0; t < NTHR; t++)
		ring_of[t] = UINT32_MAX;
	for (size_t i = 0; i < sp.n; i++) {
		struct spanrec_item it;

		if (!lt_streq(sp.v[i].r.name, "w") ||
		    !lt_item(&sp.v[i].r, SPAN_ITEM_TAG_INT, 0, &it))
			continue;
		if (ring_of[it.val] == UINT32_MAX)
			ring_of[it.val] = sp.v[i].ring;
		else if (ring_of[it.val] != sp.v[i].ring)
			per_thread_ok = 0;
	}
	ok(per_thread_ok && ring_of[0] != ring_of[1] && ring_of[1] != ring_of[2] &&
	   ring_of[0] != ring_of[2], "each thread wrote into its own ring (%u %u %u)",
	   ring_of[0], ring_of[1], ring_of[2]);
	for (int t = 0; t < NTHR; t++)
		for (int i = 0; i < HANDOFF; i++) {
			const struct lt_span *s = lt_by_id(&sp, handoff_id[t][i]);

			if (!s)
				found = 0;
			else if (s->ring == ring_of[t])
				ended_elsewhere = 0;
		}
	ok(found, "every span ended on another thread was recorded");
	ok(ended_elsewhere, "... in the ending thread's ring");
	lt_spans_free(&sp);

	/* every ring taken: main holds one, NTHR+1 threads want the other 3 */
	lost0 = view.hdr->lost_no_ring;
	pthread_barrier_init(&bar, NULL, NTHR + 2);
	for (long t = 0; t < NTHR + 1; t++)
		pthread_create(&th[t], NULL, hold_ring, (void *)t);
	pthread_barrier_wait(&bar);
	is_u64(view.hdr->lost_no_ring - lost0, 1, "one thread found no ring: lost_no_ring");
	pthread_barrier_wait(&bar);
	for (int t = 0; t < NTHR + 1; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&bar);

	/* reused rings continue from the published head: a consumer from the
	 * start sees an unbroken sequence */
	lt_read_all(&view, &sp);
	is_int(sp.bad + sp.lost + sp.corrupt, 0, "reused rings read back without gaps or losses");
	lt_spans_free(&sp);
}

/* ---- the lock-free pool under contention ------------------------------ */

#define STRESS_SPANS 20000

static struct fay_span *volatile mailbox[NTHR];

/* Each thread begins spans with children, ends half of its own and the
 * other half through a mailbox another thread empties, so handles move
 * between the threads' caches and the global stack all the time. */
static void *stress(void *arg)
{
	long t = (long)arg;

	for (int i = 0; i < STRESS_SPANS; i++) {
		struct fay_span *r = fay_span_root("stress"), *c = fay_span_child(r, "c");
		struct fay_span *got;

		fay_span_tag_int(c, "i", i);
		fay_span_end(c);
		if (i & 1) {
			fay_span_end(r);
		} else {
			/* swap our root for whatever the next thread left */
			got = __atomic_exchange_n(&mailbox[(t + 1) % NTHR], r, __ATOMIC_ACQ_REL);
			fay_span_end(got);
		}
	}
	return NULL;
}

static void test_pool_stress(void)
{
	pthread_t th[NTHR];
	uint64_t n0 = lt_records(&view), lost0 = view.hdr->lost_no_handle, recorded, lost;
	unsigned open = 0;
	struct lt_spans sp;

	for (long t = 0; t < NTHR; t++)
		pthread_create(&th[t], NULL, stress, (void *)t);
	for (int t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NTHR; t++)
		fay_span_end(mailbox[t]);
	recorded = lt_records(&view) - n0;
	lost = view.hdr->lost_no_handle - lost0;
	is_u64(recorded + lost, 2ull * NTHR * STRESS_SPANS,
	       "%d threads x %d roots+children: every span recorded or counted lost (%llu lost)",
	       NTHR, STRESS_SPANS, (unsigned long long)lost);
	for (uint32_t i = 0; i < view.hdr->npool; i++) {
		const struct fay_pool_slot *ps = (const struct fay_pool_slot *)
			(view.base + view.hdr->pool_off + (size_t)i * view.hdr->pool_stride);

		if (ps->state != FAY_POOL_FREE)
			open++;
	}
	is_int(open, 0, "every handle back in the pool afterwards");
	lt_read_all(&view, &sp);
	is_int(sp.bad + sp.corrupt, 0, "rings intact");
	lt_spans_free(&sp);
}

/* ---- recursion guard and signals -------------------------------------- */

static volatile sig_atomic_t in_handler;

static void on_alarm(int sig)
{
	struct fay_span *s = fay_span_root("sig");

	(void)sig;
	fay_span_event(s, "in handler");
	fay_span_tag(s, "k", "v");
	fay_span_end(s);
	in_handler++;
}

static void test_guard(void)
{
	struct itimerval it = { .it_interval = { 0, 200 }, .it_value = { 0, 200 } };
	struct sigaction sa = { .sa_handler = on_alarm };
	uint64_t nest0 = view.hdr->lost_nested, n0 = lt_records(&view), end;
	struct fay_span *outer, *inner;
	struct lt_spans sp;

	/* white box: a call made while this thread is inside a span call */
	outer = fay_span_root("outer");
	lib_t.nest = 1;
	inner = fay_span_root("inner");
	fay_span_event(outer, "dropped");
	fay_span_end(inner);
	lib_t.nest = 0;
	ok(((struct fay_pool_slot *)inner)->state == LIB_NONREC,
	   "root begun inside a span call: not recorded");
	ok(view.hdr->lost_nested - nest0 >= 2, "nested calls counted (%" PRIu64 ")",
	   view.hdr->lost_nested - nest0);
	fay_span_end(outer);
	is_u64(lt_records(&view) - n0, 1, "only the outer span recorded");

	/* a nested end gives the handle back without the thread's cache */
	outer = fay_span_root("outer2");
	lib_t.nest = 1;
	fay_span_end(outer);
	lib_t.nest = 0;
	ok(((struct fay_pool_slot *)outer)->state == FAY_POOL_FREE, "nested end freed the handle");

	/* real signals, every 200 us, while this thread records spans */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	end = clock_monotonic_ns() + 300000000ull;
	while (clock_monotonic_ns() < end) {
		struct fay_span *s = fay_span_root("main");

		fay_span_tag(s, "key", "value");
		fay_span_event(s, "e");
		fay_span_end(s);
		if (lt_records(&view) - n0 > 2000) {
			/* keep the ring from lapping: this is not a loss test */
			break;
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	signal(SIGALRM, SIG_DFL);
	ok(in_handler > 0, "signal handler ran %d times", (int)in_handler);
	lt_read_all(&view, &sp);
	is_int(sp.bad + sp.corrupt, 0, "rings intact after spans from signal handlers");
	diag("lost_nested after the signal run: %" PRIu64, view.hdr->lost_nested - nest0);
	lt_spans_free(&sp);
}

/* ---- fork ------------------------------------------------------------- */

static void test_fork(void)
{
	struct fay_span *open_before = fay_span_root("open across fork");
	uint64_t n0 = lt_records(&view), open_id = span_id_of(open_before);
	int pfd[2], st = 0;
	pid_t pid;
	char path[PATH_MAX];

	if (pipe(pfd)) {
		ok(0, "pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		uint64_t id;
		struct fay_span *s;

		/* a handle inherited from the parent must be inert */
		fay_span_end(open_before);
		s = fay_span_root("child span");
		id = span_id_of(s);
		fay_span_end(s);
		if (write(pfd[1], &id, sizeof(id)) != sizeof(id))
			_exit(3);
		_exit(0);
	}
	close(pfd[1]);
	{
		uint64_t child_id = 0;
		struct lt_view cv = { 0 };
		struct lt_spans sp;

		if (read(pfd[0], &child_id, sizeof(child_id)) != sizeof(child_id))
			child_id = 0;
		waitpid(pid, &st, 0);
		close(pfd[0]);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child ran");
		is_u64(lt_records(&view) - n0, 0, "child wrote nothing into the parent's file");
		is_int(lt_find(pid, path, sizeof(path)), 1, "child made its own file");
		if (!lt_map(path, &cv)) {
			is_int(cv.hdr->pid, pid, "child's file has the child's pid");
			ok(cv.hdr->instance != view.hdr->instance, "and its own instance");
			lt_read_all(&cv, &sp);
			ok(sp.n == 1 && sp.v[0].r.f.span_id == child_id,
			   "child's span is in the child's file, alone");
			lt_spans_free(&sp);
			lt_unmap(&cv);
		}
	}
	fay_span_end(open_before);
	{
		struct lt_spans sp;

		lt_read_all(&view, &sp);
		ok(lt_by_id(&sp, open_id) != NULL, "the span open across fork is recorded by the parent");
		is_int(sp.corrupt + sp.bad, 0, "parent's rings intact");
		lt_spans_free(&sp);
	}
}

int main(void)
{
	struct fay_span *pre;
	char tp[FAY_TRACEPARENT_LEN];

	lt_setup();
	setenv("FAY_RINGS", "4", 1);
	setenv("FAY_RING_KB", "1024", 1);
	setenv("FAY_POOL", "256", 1);
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_SERVICE");
	unsetenv("FAY_DISABLE");

	pre = fay_span_root("before init");
	ok(pre != NULL && fay_span_traceparent(pre, tp, sizeof(tp)) == 55,
	   "before fay_init: a handle that propagates");
	fay_span_end(pre);
	is_int(lt_count(FAY_SHM_PREFIX, NULL, 0), 0, "... and no file");
	is_int(fay_init(NULL, NULL, 0), -EINVAL, "fay_init(NULL): -EINVAL");
	is_int(fay_init("", NULL, 0), -EINVAL, "fay_init(\"\"): -EINVAL");
	is_int(fay_init("s", NULL, 65536), -EINVAL, "port 65536: -EINVAL");
	is_int(fay_init("0123456789012345678901234567890123456789012345678901234567890123",
			NULL, 0), -EINVAL, "64-char service: -EINVAL");
	is_int(fay_init("svc", "10.0.0.7", 7001), 0, "fay_init");

	test_file();
	test_basic();
	test_traceparent();
	test_tp_digits();
	test_tp_lengths();
	test_unsampled();
	test_sampling();
	test_truncation();
	test_pool();
	test_threads();
	test_pool_stress();
	test_guard();
	test_fork();
	lt_unmap(&view);
	return test_done();
}
