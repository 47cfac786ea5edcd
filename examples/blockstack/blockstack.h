/* SPDX-License-Identifier: MIT */
/*
 * blockstack: BlkKin's own example, an I/O request's route through a
 * storage stack, as five processes on TCP loopback:
 *
 *   vm-client -> composer -> mapper -> blocker-1
 *                                   -> blocker-2
 *
 * The vm-client issues reads and writes on a virtual volume; the composer
 * splits each into per-object pieces; the mapper places an object on the
 * blockers (writes replicated to both in parallel, reads from one); each
 * blocker keeps its objects in files, after a journal.  Every message
 * carries a W3C traceparent.
 *
 * Tracing: the composer and the blockers use libfay's own API
 * (<fay/trace.h>); the vm-client and the mapper use ceph/blkin's API
 * (<fay/blkin.h>), as a BlkKin program would.  The trace starts at the
 * vm-client with BlkKin's 63-bit ids, so every layer, whichever API it
 * uses, lands in the same trace (a BlkKin layer cannot carry the upper 64
 * bits of a 128-bit W3C trace id).
 */
#ifndef BLOCKSTACK_H
#define BLOCKSTACK_H

#include <stddef.h>
#include <stdint.h>

#include <fay/blkin.h>
#include <fay/trace.h>

#define BS_MAGIC        0x4b534c42u     /* "BLSK" */
#define BS_MAX_DATA     (16u << 20)
#define BS_OBJECT_LEN   32

enum bs_op {
	BS_WRITE = 1,
	BS_READ,
	BS_REPLY,
	BS_QUIT,        /* shut down, and pass it on downstream */
};

/* One message; @len bytes of data follow it (write data, read replies). */
struct bs_msg {
	uint32_t magic;
	uint16_t op;               /* enum bs_op */
	uint16_t status;           /* replies: 0 or an errno value */
	uint64_t id;               /* request number, echoed in the reply */
	uint64_t offset;           /* volume offset, or offset in the object */
	uint32_t size;             /* bytes to read or write */
	uint32_t len;              /* data bytes after the message */
	char object[BS_OBJECT_LEN];
	char traceparent[FAY_TRACEPARENT_LEN];
};

/* Everything the command line sets; roles use their part. */
struct bs_opts {
	const char *role;          /* NULL: the parent */
	const char *name;          /* blocker-1 / blocker-2 */
	long requests;
	unsigned sample;           /* 0: leave FAY_SAMPLE alone */
	int sample_set;
	double write_ratio;
	double rate;               /* requests per second; 0: as fast as it goes */
	uint32_t size;
	uint64_t volume;
	uint32_t object_size;
	const char *dir;
	uint64_t seed;
	int next_port;             /* vm-client, composer: the next layer */
	int blocker_ports[2];      /* mapper */
	int notify_fd;             /* roles: report to the parent here */
	const char *hold;          /* "blocker-1:K": hold the K-th span open */
	int quiet;
	unsigned cpu_us;           /* roles: CPU to burn per request (work.c) */
};

/* Role entry points: return the process exit status. */
int role_client(const struct bs_opts *o);
int role_composer(const struct bs_opts *o);
int role_mapper(const struct bs_opts *o);
int role_blocker(const struct bs_opts *o);

/* net.c: loopback sockets and whole messages. */
int bs_listen(int *port);
int bs_accept(int lfd);
int bs_connect(int port);
/* Send @m with @m->len bytes of @data.  0 or -errno. */
int bs_send(int fd, struct bs_msg *m, const void *data);
/* Make *buf (*cap bytes) hold at least @n bytes.  0 or -ENOMEM. */
int bs_reserve(uint8_t **buf, size_t *cap, size_t n);
/* Receive a message and its data into *buf (grown as needed, *cap bytes).
 * 0, -EPIPE at a clean end of stream, -EBADMSG for a bad message, or
 * -errno. */
int bs_recv(int fd, struct bs_msg *m, uint8_t **buf, size_t *cap);
/* Tell the parent something ("PORT 1234", "SPANS 42"). */
void bs_notify(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set up a role process: fay_init() with its service name and port,
 * blkin_init() too if @blkin, die with the parent. */
void bs_role_init(const char *service, int port, int blkin);

/* trace.c: carrying BlkKin ids in a W3C traceparent and back. */
void bs_blkin_traceparent(const struct blkin_trace_info *info,
			  char tp[FAY_TRACEPARENT_LEN]);
/* 0, or -EINVAL for a malformed traceparent or one whose trace id does not
 * fit BlkKin's 63 bits (its ids are then made unsampled). */
int bs_traceparent_blkin(const char *tp, struct blkin_trace_info *info);
/* Is a traceparent's sampled flag set? */
int bs_traceparent_sampled(const char *tp);

/* work.c: a known CPU cost per layer.  *us = the microseconds of CPU
 * BLOCKSTACK_CPU_US ("composer=1000,blocker-1=2000") gives @role per
 * request, 0 when it names it not (or @role is NULL: only check the
 * variable).  0, or -EINVAL for a malformed variable (said on stderr). */
int bs_cpu_us(const char *role, unsigned *us);
/* Spin until this thread has used @us more microseconds of CPU time. */
void bs_burn(unsigned us);

/* A small fast PRNG (splitmix64) for workload choices. */
uint64_t bs_rand(uint64_t *state);

#endif
