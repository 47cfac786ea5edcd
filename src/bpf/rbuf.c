// SPDX-License-Identifier: MIT
/*
 * A streamed map's reader through libbpf's ring_buffer and perf_buffer
 * (rbuf.h).
 */
#include <errno.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "bpf/load.h"
#include "bpf/rbuf.h"

struct brbuf {
	struct ring_buffer *rb;
	struct perf_buffer *pb;
	brbuf_rec_fn rec;
	brbuf_lost_fn lost;
	void *ctx;
};

static int ring_rec(void *ctx, void *data, size_t size)
{
	struct brbuf *b = ctx;

	return b->rec(b->ctx, data, size);
}

static void perf_rec(void *ctx, int cpu, void *data, __u32 size)
{
	struct brbuf *b = ctx;

	(void)cpu;
	b->rec(b->ctx, data, size);
}

static void perf_lost(void *ctx, int cpu, __u64 n)
{
	struct brbuf *b = ctx;

	if (b->lost)
		b->lost(b->ctx, cpu, n);
}

struct brbuf *brbuf_new(const struct bmap *m, size_t perf_pages, brbuf_rec_fn rec,
			brbuf_lost_fn lost, void *ctx)
{
	struct brbuf *b;
	int err;

	if (!m || bmap_fd(m) < 0 || !rec) {
		errno = EINVAL;
		return NULL;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	*b = (struct brbuf){ .rec = rec, .lost = lost, .ctx = ctx };
	if (bmap_type(m) == BPF_MAP_TYPE_RINGBUF)
		b->rb = ring_buffer__new(bmap_fd(m), ring_rec, b, NULL);
	else if (bmap_type(m) == BPF_MAP_TYPE_PERF_EVENT_ARRAY)
		b->pb = perf_buffer__new(bmap_fd(m), perf_pages, perf_rec, perf_lost, b, NULL);
	else
		errno = EINVAL;
	if (!b->rb && !b->pb) {
		err = errno ? errno : EINVAL;
		free(b);
		errno = err;
		return NULL;
	}
	return b;
}

int brbuf_fd(const struct brbuf *b)
{
	return b->rb ? ring_buffer__epoll_fd(b->rb) : perf_buffer__epoll_fd(b->pb);
}

int brbuf_consume(struct brbuf *b)
{
	return b->rb ? ring_buffer__consume(b->rb) : perf_buffer__consume(b->pb);
}

void brbuf_free(struct brbuf *b)
{
	if (!b)
		return;
	ring_buffer__free(b->rb);
	perf_buffer__free(b->pb);
	free(b);
}
