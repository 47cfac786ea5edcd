// SPDX-License-Identifier: MIT
/*
 * bench_ring: how fast the agent drains a span ring, and what a ring_write
 * costs the instrumented thread.  Peer: plain memcpy of the same bytes (the
 * upper bound for any reader of the ring), measured in the same run.
 * Every figure is the median of several runs.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/ring/ring.h"
#include "common/spanrec.h"
#include "bench.h"

#define NSLOTS_DEFAULT 4096u    /* a 256 KiB ring */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A realistic span: fixed part plus name, two tags, one event (the agent
 * adds the endpoint later).  Returns the item bytes in items. */
static size_t make_span(struct spanrec_fixed *f, uint8_t *items, size_t cap)
{
	size_t off = 0;

	memset(f, 0, sizeof(*f));
	f->trace_hi = 0x0123456789abcdefull;
	f->trace_lo = 0xfedcba9876543210ull;
	f->span_id = 0x1122334455667788ull;
	f->parent_id = 0x8877665544332211ull;
	f->start_ns = 1700000000000000000ull;
	f->duration_ns = 125000;
	f->kind = SPAN_KIND_SERVER;
	f->flags = SPAN_F_SAMPLED;
	spanrec_put_item(items, cap, &off, SPAN_ITEM_NAME, 0, "osd_op_write", 12, NULL, 0);
	spanrec_put_item(items, cap, &off, SPAN_ITEM_TAG, 0, "object", 6,
			 "rbd_data.1f2e.0001", 18);
	spanrec_put_item(items, cap, &off, SPAN_ITEM_TAG_INT, 4096, "length", 6, NULL, 0);
	spanrec_put_item(items, cap, &off, SPAN_ITEM_EVENT, 1700000000000050000ull,
			 "journal", 7, NULL, 0);
	f->items_len = (uint32_t)off;
	f->nitems = 4;
	return off;
}

/* The agent's side of a delivery: append the record to a batch. */
struct batch {
	uint8_t *buf;
	size_t off, cap;
};

static int to_batch(void *ctx, uint16_t type, const void *payload, uint32_t len,
		    uint64_t rec_no)
{
	struct batch *b = ctx;

	if (b->off + 4 + len > b->cap)
		b->off = 0;
	memcpy(b->buf + b->off, &len, 4);
	memcpy(b->buf + b->off + 4, payload, len);
	b->off += 4 + len;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    bench_ring - drain rate of the fay span ring vs memcpy, and ring_write cost\n"
"\n"
"SYNOPSIS\n"
"    bench_ring [--runs N] [--slots N] [--seconds S]\n"
"\n"
"DESCRIPTION\n"
"    Fills a ring with realistic span records (spanrec, ~150-byte payload),\n"
"    drains it on one core into a batch buffer as the agent does, and\n"
"    compares with a plain memcpy of the same slot bytes.  Then measures\n"
"    the producer: ns per ring_write of the same record in two pieces\n"
"    (fixed part + items, as libfay writes it) against a memcpy of its\n"
"    bytes.  Prints the median of N runs and the ratios.\n"
"\n"
"OPTIONS\n"
"    --runs N      runs per figure (default 7)\n"
"    --slots N     ring slots, a power of two (default 4096)\n"
"    --seconds S   approximate time per run (default 0.3)\n"
"    --help        this text\n"
"\n"
"EXAMPLES\n"
"    make O=/tmp/b bench && /tmp/b/bench/bench_ring --runs 9\n"
"\n"
"EXIT STATUS\n"
"    0 when the drain rate met the goal (>= 5 M records/s), 1 otherwise,\n"
"    2 on bad usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "slots", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int runs = 7, opt;
	uint32_t nslots = NSLOTS_DEFAULT;
	double secs = 0.3;

	while ((opt = getopt_long(argc, argv, "r:s:t:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': runs = atoi(optarg); break;
		case 's': nslots = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (runs < 1 || runs > 99 || nslots < 64 || (nslots & (nslots - 1)) || secs <= 0) {
		fprintf(stderr, "error: --runs 1..99, --slots a power of two >= 64, --seconds > 0\n");
		return 2;
	}

	struct spanrec_fixed f;
	uint8_t items[512];
	size_t ilen = make_span(&f, items, sizeof(items));
	uint32_t plen = (uint32_t)(sizeof(f) + ilen);
	uint32_t rslots = (uint32_t)ring_rec_slots(plen);
	struct ring_piece pc[2] = { { &f, sizeof(f) }, { items, (uint32_t)ilen } };
	size_t ringsz = FAY_RING_CTL_SIZE + (size_t)nslots * FAY_SLOT_SIZE;
	void *ring = aligned_alloc(64, ringsz);
	uint8_t *copy = aligned_alloc(64, ringsz);
	struct batch b = { .cap = 4u << 20 };
	double *drain = calloc(runs, sizeof(double)), *mcpy = calloc(runs, sizeof(double));
	double *wr = calloc(runs, sizeof(double)), *wmc = calloc(runs, sizeof(double));
	/* Records one fill leaves in the ring for the consumer. */
	uint32_t per_fill = nslots / rslots;
	struct ring_prod p;
	struct ring_cons c;
	int r, rc = 0;

	b.buf = malloc(b.cap);
	if (!ring || !copy || !b.buf || !drain || !mcpy || !wr || !wmc) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	memset(ring, 0, ringsz);
	memset(copy, 0, ringsz);
	memset(b.buf, 0, b.cap);
	ring_prod_init(&p, ring, nslots);
	if ((rc = ring_cons_init(&c, ring, nslots, 0, 0))) {
		fprintf(stderr, "error: ring_cons_init: %s\n", strerror(-rc));
		return 1;
	}

	for (r = 0; r < runs; r++) {
		double td = 0, tm = 0, t0, end = now() + secs;
		uint64_t nd = 0, nm = 0;

		while (now() < end) {
			for (uint32_t i = 0; i < per_fill; i++)
				ring_write(&p, FAY_REC_SPAN, pc, 2);
			t0 = now();
			nd += (uint64_t)ring_drain(&c, to_batch, &b, 0);
			td += now() - t0;

			/* Peer: the same slot bytes, one memcpy, plus the
			 * batch copy the drain also does. */
			t0 = now();
			memcpy(copy, (uint8_t *)ring + FAY_RING_CTL_SIZE,
			       (size_t)per_fill * rslots * FAY_SLOT_SIZE);
			for (uint32_t i = 0; i < per_fill; i++)
				to_batch(&b, FAY_REC_SPAN, copy + (size_t)i * rslots * FAY_SLOT_SIZE,
					 plen, i);
			tm += now() - t0;
			nm += per_fill;
		}
		drain[r] = nd / td;
		mcpy[r] = nm / tm;
	}
	if (c.lost || c.corrupt) {
		fprintf(stderr, "error: drain lost %llu, corrupt %llu: %s\n",
			(unsigned long long)c.lost, (unsigned long long)c.corrupt, c.err);
		return 1;
	}

	for (r = 0; r < runs; r++) {
		uint64_t n = 0, k;
		double t0, end = now() + secs / 2;
		uint8_t *dst = copy;

		t0 = now();
		while (now() < end) {
			for (k = 0; k < 10000; k++)
				ring_write(&p, FAY_REC_SPAN, pc, 2);
			n += k;
		}
		wr[r] = (now() - t0) * 1e9 / n;

		n = 0;
		t0 = now();
		end = t0 + secs / 2;
		while (now() < end) {
			for (k = 0; k < 10000; k++) {
				memcpy(dst, &f, sizeof(f));
				memcpy(dst + sizeof(f), items, ilen);
				dst += rslots * FAY_SLOT_SIZE;
				if (dst + rslots * FAY_SLOT_SIZE > copy + ringsz)
					dst = copy;
			}
			n += k;
		}
		wmc[r] = (now() - t0) * 1e9 / n;
	}

	double md = median(drain, runs), mm = median(mcpy, runs);
	double mw = median(wr, runs), mwm = median(wmc, runs);

	printf("bench_ring: span record payload %u B (%u slots), ring %u slots, "
	       "%d runs, medians\n", plen, rslots, nslots, runs);
	printf("  drain  (fay ring_drain -> batch)   %8.2f M records/s  %6.1f ns/record\n",
	       md / 1e6, 1e9 / md);
	printf("  peer   (memcpy same bytes -> batch) %7.2f M records/s  %6.1f ns/record\n",
	       mm / 1e6, 1e9 / mm);
	printf("  ratio  drain / memcpy               %8.2f\n", md / mm);
	printf("  write  (fay ring_write, 2 pieces)   %8.1f ns/record\n", mw);
	printf("  peer   (memcpy same bytes)          %8.1f ns/record\n", mwm);
	printf("  ratio  ring_write / memcpy          %8.2f\n", mw / mwm);
	printf("  goal   drain >= 5 M records/s: %s\n", md >= 5e6 ? "met" : "NOT met");

	ring_cons_free(&c);
	free(ring);
	free(copy);
	free(b.buf);
	free(drain);
	free(mcpy);
	free(wr);
	free(wmc);
	return md >= 5e6 ? 0 : 1;
}
