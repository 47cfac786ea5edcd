// SPDX-License-Identifier: MIT
/*
 * A thread takes a ring another thread of the process gave back before a
 * ring never used (src/lib/shm.c, lib_ring_claim): threads started one
 * after another all record into the ring the first of them took (a new
 * ring would cost its reservation and a page fault per 4 KiB written),
 * threads alive at once still each get their own, and every span reads
 * back without a gap or a loss.
 */
#include <pthread.h>
#include <unistd.h>

#include <fay/trace.h>

#include "libtest.h"

#define NSEQ 8          /* threads started one after another */
#define SPANS 50        /* spans each records */

static struct lt_view v;
static pthread_barrier_t both;

/* Rings whose ctl says something was ever written into them. */
static unsigned rings_used(void)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < v.hdr->nrings; i++)
		n += __atomic_load_n(&lt_ctl(&v, i)->records, __ATOMIC_ACQUIRE) != 0;
	return n;
}

static void spans(void)
{
	for (int i = 0; i < SPANS; i++) {
		struct fay_span *s = fay_span_root("reuse");

		fay_span_tag(s, "k", "v");
		fay_span_end(s);
	}
}

static void *one(void *arg)
{
	(void)arg;
	spans();
	return NULL;
}

static void *together(void *arg)
{
	(void)arg;
	spans();
	pthread_barrier_wait(&both);    /* both hold their ring here */
	return NULL;
}

int main(void)
{
	char path[PATH_MAX];
	struct lt_spans sp;
	pthread_t th[2];
	unsigned after_first;

	lt_setup();
	setenv("FAY_RINGS", "64", 1);
	setenv("FAY_RING_KB", "64", 1);
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_DISABLE");
	is_int(fay_init("reuse", NULL, 0), 0, "fay_init");
	spans();                        /* main holds its ring throughout */
	ok(lt_find(getpid(), path, sizeof(path)) == 1 && lt_map(path, &v) == 0, "the file, mapped");
	is_int(rings_used(), 1, "main: one ring");

	pthread_create(&th[0], NULL, one, NULL);
	pthread_join(th[0], NULL);
	after_first = rings_used();
	is_int(after_first, 2, "a first thread: a ring of its own");
	for (int i = 1; i < NSEQ; i++) {
		pthread_create(&th[0], NULL, one, NULL);
		pthread_join(th[0], NULL);
	}
	is_int(rings_used(), 2, "%d more threads one after another: all in the ring the first gave back",
	       NSEQ - 1);

	pthread_barrier_init(&both, NULL, 2);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, together, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&both);
	is_int(rings_used(), 3, "two threads alive at once: one ring each (the given-back one and a new one)");

	lt_read_all(&v, &sp);
	is_int(sp.bad + sp.lost + sp.corrupt, 0, "reused rings read back without gaps or losses");
	is_u64(sp.n, (uint64_t)SPANS * (1 + NSEQ + 2), "every span recorded");
	lt_spans_free(&sp);
	lt_unmap(&v);
	return test_done();
}
