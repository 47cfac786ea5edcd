// SPDX-License-Identifier: MIT
/*
 * A program written for ceph/blkin, the way BlkKin's examples are: it
 * includes <zipkin_c.h>, uses only BlkKin's API, and builds unchanged
 * against libfay (-I include/fay -lfay).  One request: a client span
 * (cs, a key-value, cr) with a server child span (sr, an integer
 * key-value, ss), its info packed and unpacked as if sent over the wire.
 * Prints "trace span child" ids in decimal for the test that runs it
 * (tests/unit/lib/test_linked.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include <zipkin_c.h>

static struct blkin_endpoint client_ep, server_ep;

static int64_t serve(const struct blkin_trace_info_packed *wire)
{
	struct blkin_trace_info info;
	struct blkin_trace trace;

	blkin_unpack_trace_info(wire, &info);
	blkin_init_child_info(&trace, &info, &server_ep, "osd_op");
	BLKIN_TIMESTAMP(&trace, &server_ep, SERVER_RECV);
	BLKIN_KEYVAL_INTEGER(&trace, &server_ep, "bytes", 4096);
	BLKIN_TIMESTAMP(&trace, &server_ep, SERVER_SEND);
	return trace.info.span_id;
}

int main()
{
	struct blkin_trace trace;
	struct blkin_trace_info_packed wire;
	int64_t child;

	if (blkin_init() < 0) {
		fprintf(stderr, "Could not initialize blkin\n");
		exit(1);
	}
	blkin_init_endpoint(&client_ep, "10.0.0.1", 5000, "rbd client");
	blkin_init_endpoint(&server_ep, "10.0.0.2", 6800, "osd.0");
	blkin_init_new_trace(&trace, "rbd_write", &client_ep);
	BLKIN_TIMESTAMP(&trace, &client_ep, CLIENT_SEND);
	BLKIN_KEYVAL_STRING(&trace, &client_ep, "object", "rbd_data.1");
	blkin_pack_trace_info(&trace.info, &wire);
	child = serve(&wire);
	BLKIN_TIMESTAMP(&trace, &client_ep, CLIENT_RECV);
	printf("%lld %lld %lld\n", (long long)trace.info.trace_id,
	       (long long)trace.info.span_id, (long long)child);
	return 0;
}
