// SPDX-License-Identifier: MIT
/*
 * The current-span cells of the shm file (docs/ABI.md 1.6), read through
 * a second, read-only mapping as a sampler outside the process reads
 * them: the header describes the table; a thread's cell (tid & (ncur -
 * 1)) holds its id and, while it is in a recorded span, that span's id
 * and the file offset of its handle (open, same span id, the name as its
 * first item); nesting and ends move it; a span ended by another thread
 * no longer passes the handle check; a thread gives its cell back at
 * exit; an unsampled span leaves it empty.
 */
#include <pthread.h>
#include <unistd.h>

#include <fay/trace.h>

#include "libtest.h"

static struct lt_view v;

static const struct fay_cur_cell *cell_of(uint32_t tid)
{
	const struct fay_shm_hdr *h = v.hdr;

	return (const struct fay_cur_cell *)(v.base + h->cur_off +
					     (uint64_t)(tid & (h->ncur - 1)) * h->cur_stride);
}

/* The name of the span the cell of tid says is current, checked as a
 * sampler checks it; "" for none. */
static const char *cell_name(uint32_t tid)
{
	static char name[80];
	const struct fay_cur_cell *c = cell_of(tid);
	const struct fay_pool_slot *sl;
	size_t n;

	name[0] = '\0';
	if (c->tid != tid || !c->slot_off || c->slot_off >= v.size)
		return name;
	sl = (const struct fay_pool_slot *)(v.base + c->slot_off);
	if (sl->state != FAY_POOL_OPEN || sl->fixed.span_id != c->span_id ||
	    sl->buf[0] != SPAN_ITEM_NAME)
		return name;
	n = (size_t)sl->buf[2] | (size_t)sl->buf[3] << 8;
	if (n > sizeof(name) - 1)
		n = sizeof(name) - 1;
	memcpy(name, sl->buf + SPANREC_ITEM_HDR, n);
	name[n] = '\0';
	return name;
}

static void *end_it(void *s)
{
	fay_span_end(s);
	return NULL;
}

static uint32_t other_tid;

static void *other(void *arg)
{
	struct fay_span *s = fay_span_root("other-thread");

	(void)arg;
	other_tid = (uint32_t)gettid();
	fay_span_end(s);
	s = fay_span_root("other-thread");
	return s;	/* exits in a span: the cell still goes back */
}

int main(void)
{
	struct fay_span *a, *b;
	char path[4096];
	uint32_t me = (uint32_t)gettid();
	pthread_t t;
	void *r;

	lt_setup();
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_DISABLE");
	is_int(fay_init("curcell", NULL, 0), 0, "fay_init");
	a = fay_span_root("outer");
	ok(lt_find(getpid(), path, sizeof(path)) == 1 && lt_map(path, &v) == 0, "the file, mapped again");
	ok(v.hdr->ncur == 1024 && v.hdr->cur_stride == FAY_CUR_CELL_SIZE &&
	   v.hdr->cur_off >= v.hdr->pool_off + (uint64_t)v.hdr->npool * v.hdr->pool_stride &&
	   v.hdr->cur_off + (uint64_t)v.hdr->ncur * FAY_CUR_CELL_SIZE <= v.hdr->rings_off,
	   "the header: 1024 cells of 64 bytes between the pool and the rings");
	is_int((int)cell_of(me)->tid, (int)me, "the thread holds its cell");
	is_str(cell_name(me), "outer", "a root: its handle, open with the cell's span id");
	b = fay_span_child(a, "inner");
	is_str(cell_name(me), "inner", "a child: the innermost");
	fay_span_end(b);
	is_str(cell_name(me), "outer", "ended: back to the parent");
	b = fay_span_child(a, "handed-off");
	pthread_create(&t, NULL, end_it, b);
	pthread_join(t, NULL);
	is_str(cell_name(me), "", "a span ended by another thread fails the handle check");
	fay_span_end(a);
	is_str(cell_name(me), "", "all ended: none");
	ok(cell_of(me)->slot_off == 0, "slot_off 0");
	pthread_create(&t, NULL, other, NULL);
	pthread_join(t, &r);
	is_int((int)cell_of(other_tid)->tid, 0, "a thread that exited (in a span) gave its cell back");
	fay_set_sampling(0);
	a = fay_span_root("unsampled");
	is_str(cell_name(me), "", "an unsampled span is never in the cell");
	fay_span_end(a);
	fay_span_end(r);
	lt_unmap(&v);
	lt_cleanup();
	return test_done();
}
