/* SPDX-License-Identifier: MIT */
/*
 * Records a BPF program streams to user space: read from a BPF ring
 * buffer (a RINGBUF map, Linux 5.8) or from per-CPU perf buffers (a
 * PERF_EVENT_ARRAY map), through libbpf's readers.  One reader whatever
 * the map: the caller polls its fd and consumes.
 */
#ifndef FAY_BPF_RBUF_H
#define FAY_BPF_RBUF_H

#include <stddef.h>
#include <stdint.h>

struct bmap;
struct brbuf;

/* One record of size bytes (valid during the call).  A nonzero return
 * stops this brbuf_consume() (a ring buffer; perf buffers read on). */
typedef int (*brbuf_rec_fn)(void *ctx, const void *data, size_t size);
/* n records the kernel could not write into cpu's perf buffer (a full
 * one); a ring buffer's program counts its own. */
typedef void (*brbuf_lost_fn)(void *ctx, int cpu, uint64_t n);

/* A reader of map m (created: bmap_create()), a RINGBUF or a
 * PERF_EVENT_ARRAY whose per-CPU buffers get perf_pages pages each (a
 * power of two); rec and lost (may be NULL) are called with ctx.  NULL
 * with errno set (EINVAL: another map type).  Free with brbuf_free(). */
struct brbuf *brbuf_new(const struct bmap *m, size_t perf_pages, brbuf_rec_fn rec,
			brbuf_lost_fn lost, void *ctx);
/* The fd to poll for records (readable when some are waiting). */
int brbuf_fd(const struct brbuf *b);
/* Read every record waiting now.  The number read, or -errno. */
int brbuf_consume(struct brbuf *b);
/* Stop reading (records not consumed are dropped); NULL is fine. */
void brbuf_free(struct brbuf *b);

#endif
