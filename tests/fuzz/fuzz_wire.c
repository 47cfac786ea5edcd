// SPDX-License-Identifier: MIT
/*
 * The agent protocol as a collector or an agent reads it: the bytes of a
 * connection (through a real socketpair and wire_read(), the reader both
 * ends use), each complete frame handed to its decoder by type, a BATCH
 * walked record by record with every span record decoded and its items
 * iterated.  Properties: a decoded HELLO re-encodes and decodes to the
 * same fields; wire_batch_walk() and the record-by-record reader agree on
 * the count.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/spanrec.h"
#include "common/wire.h"
#include "common/wire_cluster.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void hello_roundtrip(const struct wire_frame *f)
{
	struct wire_hello a, b;
	struct wire_buf wb = { 0 };
	struct wire_frame g;
	char err[256];

	if (wire_get_hello(f, &a, err, sizeof(err)))
		return;
	FUZZ_CHECK(!wire_put_hello(&wb, &a), "re-encoding a decoded HELLO");
	memcpy(&g.h, wb.p + wb.off, sizeof(g.h));
	/* the frame the encoder wrote: header then payload */
	FUZZ_CHECK(!wire_hdr_check(&g.h, err, sizeof(err)), "%s", err);
	g.payload = (const uint8_t *)wb.p + wb.off + FAY_WIRE_HDR_SIZE;
	FUZZ_CHECK(!wire_get_hello(&g, &b, err, sizeof(err)), "%s", err);
	FUZZ_CHECK(!strcmp(a.agent_id, b.agent_id) && !strcmp(a.host, b.host) &&
		   !strcmp(a.role, b.role) && !strcmp(a.kernel, b.kernel) && a.btf == b.btf &&
		   a.collector == b.collector && !strcmp(a.session, b.session),
		   "HELLO fields changed in a round trip");
	wire_buf_free(&wb);
}

static void batch(const struct wire_frame *f)
{
	struct wire_batch_rd rd;
	const uint8_t *rec;
	uint32_t len, off;
	char err[256];
	int n = 0, r, walked;

	walked = wire_batch_walk(f->payload, f->h.len, NULL, NULL, err, sizeof(err));
	if (wire_get_batch(f, &rd, err, sizeof(err)))
		return;
	while ((r = wire_batch_next(&rd, &rec, &len, err, sizeof(err))) == 1) {
		struct spanrec s;
		struct spanrec_item it;

		n++;
		if (spanrec_decode(rec, len, &s, err, sizeof(err)) < 0)
			continue;
		off = 0;
		while (spanrec_next(&s, &off, &it) == 1)
			;
	}
	if (r == 0)
		FUZZ_CHECK(walked == n, "walk counted %d records, the reader %d", walked, n);
}

static void frame(const struct wire_frame *f)
{
	char err[256];
	union {
		struct wire_welcome w;
		struct wire_ack a;
		struct wire_nack n;
		struct wire_error e;
		struct wire_stats s;
		struct wire_query q;
		struct wire_qstatus qs;
		struct wire_partial p;
	} m;
	uint32_t qid;

	switch (f->h.type) {
	case WIRE_HELLO: hello_roundtrip(f); break;
	case WIRE_WELCOME: wire_get_welcome(f, &m.w, err, sizeof(err)); break;
	case WIRE_BATCH: batch(f); break;
	case WIRE_ACK: wire_get_ack(f, &m.a, err, sizeof(err)); break;
	case WIRE_NACK: wire_get_nack(f, &m.n, err, sizeof(err)); break;
	case WIRE_ERROR: wire_get_error(f, &m.e, err, sizeof(err)); break;
	case WIRE_STATS:
		if (!wire_get_stats(f, &m.s, err, sizeof(err)))
			wire_stats_release(&m.s);
		break;
	case WIRE_QUERY: wire_query_decode(f->payload, f->h.len, &m.q, err, sizeof(err)); break;
	case WIRE_QSTATUS: wire_qstatus_decode(f->payload, f->h.len, &m.qs, err, sizeof(err)); break;
	case WIRE_PARTIAL:
		memset(&m.p, 0, sizeof(m.p));
		if (!wire_partial_decode(f->payload, f->h.len, &m.p, err, sizeof(err)))
			free(m.p.hosts);
		break;
	case WIRE_CANCEL: wire_u32_decode(f->payload, f->h.len, &qid, err, sizeof(err)); break;
	default: break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_reader rd;
	struct wire_frame f;
	char err[256];
	int sv[2], r;

	if (size > 65536 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	{
		int big = 1 << 20;

		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	}
	if (write(sv[0], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	close(sv[0]);
	wire_reader_init(&rd, 1u << 20);
	while ((r = wire_read(&rd, sv[1], &f, err, sizeof(err))) == 1)
		frame(&f);
	FUZZ_CHECK(r == -ENOTCONN || r == -ECONNRESET || r == -EPROTO || r == -EBADMSG,
		   "wire_read returned %d at the end of the bytes", r);
	wire_reader_free(&rd);
	close(sv[1]);
	return 0;
}
