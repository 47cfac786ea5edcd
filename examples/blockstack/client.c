// SPDX-License-Identifier: MIT
/*
 * blockstack vm-client: issues --requests reads and writes on a virtual
 * volume, one at a time, and checks every read against what it wrote.
 * Each request is the root of a trace, recorded with ceph/blkin's API
 * (cs at send, cr at the reply, offset and size as key-values).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockstack.h"

int role_client(const struct bs_opts *o)
{
	struct blkin_endpoint ep;
	uint64_t rng = o->seed, writes = 0, reads = 0, bytes = 0, spans = 0;
	long failed = 0;
	uint8_t *shadow = NULL, *data = NULL, *rbuf = NULL;
	size_t rcap = 0;
	struct timespec next;
	int fd, ret = 1;

	bs_role_init("vm-client", 0, 1);
	blkin_init_endpoint(&ep, "127.0.0.1", 0, "vm-client");
	fd = bs_connect(o->next_port);
	if (fd < 0) {
		fprintf(stderr, "vm-client: connect to the composer on port %d: %s\n",
			o->next_port, strerror(-fd));
		return 1;
	}
	shadow = calloc(1, o->volume);
	data = malloc(o->size);
	if (!shadow || !data) {
		fprintf(stderr, "vm-client: out of memory for a %llu-byte volume\n",
			(unsigned long long)o->volume);
		goto out;
	}

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long i = 0; i < o->requests; i++) {
		int is_write = (double)(bs_rand(&rng) >> 11) / (double)(1ull << 53) <
			       o->write_ratio;
		uint64_t slots = (o->volume - o->size) / 4096 + 1;
		uint64_t off = bs_rand(&rng) % slots * 4096;
		struct blkin_trace t;
		struct bs_msg m = { .op = is_write ? BS_WRITE : BS_READ,
				    .id = (uint64_t)i, .offset = off, .size = o->size };
		const char *why = NULL;
		int err;

		if (o->rate > 0) {
			/* Paced: request i starts i / rate seconds after the first. */
			uint64_t ns = (uint64_t)(1e9 / o->rate);

			next.tv_nsec += (long)(ns % 1000000000u);
			next.tv_sec += (time_t)(ns / 1000000000u) + next.tv_nsec / 1000000000;
			next.tv_nsec %= 1000000000;
			if (i)
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
					;
		}
		blkin_init_new_trace(&t, is_write ? "write" : "read", &ep);
		BLKIN_TIMESTAMP(&t, &ep, CLIENT_SEND);
		BLKIN_KEYVAL_INTEGER(&t, &ep, "offset", (int64_t)off);
		BLKIN_KEYVAL_INTEGER(&t, &ep, "size", (int64_t)o->size);
		bs_blkin_traceparent(&t.info, m.traceparent);
		bs_burn(o->cpu_us);
		if (is_write) {
			for (uint32_t k = 0; k < o->size; k += 8) {
				uint64_t r = bs_rand(&rng);

				memcpy(data + k, &r, o->size - k < 8 ? o->size - k : 8);
			}
			m.len = o->size;
		}
		err = bs_send(fd, &m, is_write ? data : NULL);
		if (!err)
			err = bs_recv(fd, &m, &rbuf, &rcap);
		if (err) {
			why = strerror(-err);
		} else if (m.op != BS_REPLY || m.id != (uint64_t)i) {
			why = "unexpected reply";
		} else if (m.status) {
			why = strerror(m.status);
		} else if (is_write) {
			memcpy(shadow + off, data, o->size);
		} else if (m.len != o->size || memcmp(rbuf, shadow + off, o->size)) {
			why = "read returned other data than was written";
		}
		if (why) {
			BLKIN_KEYVAL_STRING(&t, &ep, "error", why);
			fprintf(stderr, "vm-client: request %ld (%s %u bytes at %llu) failed: %s\n",
				i, is_write ? "write" : "read", o->size,
				(unsigned long long)off, why);
			failed++;
		}
		BLKIN_TIMESTAMP(&t, &ep, CLIENT_RECV);
		if (t.info.trace_id >= 0)
			spans++;
		if (is_write)
			writes++;
		else
			reads++;
		bytes += o->size;
		if (err && err != -ENOMEM)
			break;          /* the composer is gone */
	}
	ret = failed ? 1 : 0;
out:
	{
		struct bs_msg q = { .op = BS_QUIT };

		bs_send(fd, &q, NULL);
	}
	close(fd);
	bs_notify(o->notify_fd, "DONE %llu %llu %ld %llu",
		  (unsigned long long)writes, (unsigned long long)reads, failed,
		  (unsigned long long)bytes);
	bs_notify(o->notify_fd, "SPANS %llu", (unsigned long long)spans);
	free(shadow);
	free(data);
	free(rbuf);
	return ret;
}
