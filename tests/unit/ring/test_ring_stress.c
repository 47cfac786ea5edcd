// SPDX-License-Identifier: MIT
/*
 * The big one: 8 producer threads write 1M records each into their own
 * small ring (so they lap the consumer over and over) while one consumer
 * thread drains all 8 rings in a loop.  At the end, for every ring:
 * delivered + lost == 1M exactly, nothing corrupt, and every delivered
 * payload intact (checksum), from the right producer, with rec_no equal to
 * the sequence number it carries, strictly increasing.
 */
#include <pthread.h>
#include <time.h>

#include "common/atomic.h"
#include "ringtest.h"
#include "test.h"

#define NPROD    8
#define NRECS    1000000u
#define NSLOTS   256u

struct prod {
	pthread_t th;
	uint32_t id;
	void *mem;
	int werr;
};

struct check {
	uint32_t id;
	uint64_t bad, n, next_min;
};

static int stop;

static void *produce(void *arg)
{
	struct prod *pr = arg;
	struct ring_prod p;
	uint8_t buf[256];

	ring_prod_init(&p, pr->mem, NSLOTS);
	for (uint64_t seq = 0; seq < NRECS; seq++) {
		uint32_t len = (uint32_t)(TP_MIN + (seq * 7919) % 200);
		struct ring_piece pc[2] = {
			{ buf, 64 < len ? 64 : len },
			{ buf + (64 < len ? 64 : len), len - (64 < len ? 64 : len) },
		};

		tp_make(buf, len, pr->id, seq);
		pr->werr |= ring_write(&p, FAY_REC_SPAN, pc, 2);
	}
	return NULL;
}

static int on_rec(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	struct check *k = ctx;
	struct tp_hdr h;

	if (type != FAY_REC_SPAN || tp_check(payload, len, &h) || h.id != k->id ||
	    h.seq != rec_no || rec_no < k->next_min) {
		if (k->bad++ < 3)
			printf("# ring %u: bad record rec_no %llu len %u\n", k->id,
			       (unsigned long long)rec_no, len);
	}
	k->next_min = rec_no + 1;
	k->n++;
	return 0;
}

struct consumer {
	pthread_t th;
	struct ring_cons c[NPROD];
	struct check k[NPROD];
	uint64_t passes;
};

static void *consume(void *arg)
{
	struct consumer *cs = arg;
	int i, last = 0;

	for (;;) {
		/* One more full pass after the producers are done. */
		if (smp_load_acquire(&stop))
			last = 1;
		for (i = 0; i < NPROD; i++)
			while (ring_drain(&cs->c[i], on_rec, &cs->k[i], 0) > 0)
				;
		cs->passes++;
		if (last)
			break;
	}
	for (i = 0; i < NPROD; i++)
		ring_cons_finish(&cs->c[i]);
	return NULL;
}

int main(void)
{
	static struct consumer cs;
	struct prod pr[NPROD];
	struct timespec t0, t1;
	int i, init = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < NPROD; i++) {
		pr[i].id = (uint32_t)i;
		pr[i].mem = ringmem_new(NSLOTS);
		pr[i].werr = 0;
		init |= !pr[i].mem || ring_cons_init(&cs.c[i], pr[i].mem, NSLOTS, 0, 0);
		cs.k[i].id = (uint32_t)i;
	}
	if (init)
		skip_all("out of memory");
	pthread_create(&cs.th, NULL, consume, &cs);
	for (i = 0; i < NPROD; i++)
		pthread_create(&pr[i].th, NULL, produce, &pr[i]);
	for (i = 0; i < NPROD; i++)
		pthread_join(pr[i].th, NULL);
	smp_store_release(&stop, 1);
	pthread_join(cs.th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	diag("%d x %u records in %.2f s, %llu consumer passes", NPROD, NRECS,
	     (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	     (unsigned long long)cs.passes);

	uint64_t total_d = 0, laps = 0;
	for (i = 0; i < NPROD; i++) {
		struct ring_cons *c = &cs.c[i];

		is_int(pr[i].werr, 0, "ring %d: every write accepted", i);
		is_u64(ringmem_ctl(pr[i].mem)->records, NRECS, "ring %d: 1M records committed", i);
		is_u64(c->delivered + c->lost, NRECS,
		       "ring %d: delivered %llu + lost %llu == 1M", i,
		       (unsigned long long)c->delivered, (unsigned long long)c->lost);
		is_u64(cs.k[i].n, c->delivered, "ring %d: callback saw each delivery once", i);
		is_u64(cs.k[i].bad, 0, "ring %d: payloads intact, right producer, rec_no in order", i);
		is_u64(c->corrupt, 0, "ring %d: nothing corrupt %s", i, c->err);
		total_d += c->delivered;
		laps += c->laps;
		ring_cons_free(c);
		free(pr[i].mem);
	}
	ok(total_d > 0, "the consumer got %llu records while lapped",
	   (unsigned long long)total_d);
	ok(laps > 0, "the consumer was lapped %llu times", (unsigned long long)laps);
	return test_done();
}
