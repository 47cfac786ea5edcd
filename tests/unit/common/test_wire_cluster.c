// SPDX-License-Identifier: MIT
/*
 * QUERY frames of the cluster protocol (src/common/wire_cluster.c) carry
 * the requester's probe right (#20): WIRE_QF_PROBE round trips; a QUERY
 * of a collector before #20 (no flags byte) decodes with no flag, which
 * qlink.c refuses; a flags byte followed by more bytes is refused.
 */
#include <errno.h>
#include <string.h>

#include "common/bytes.h"
#include "common/wire_cluster.h"
#include "test.h"

static void encode(unsigned flags, struct wbuf *w)
{
	struct wire_query q = {
		.qid = 7, .deadline_ns = 11, .window_ns = 1000000000ull,
		.text = "from s in cluster.syscall(\"read\") select count()",
		.flags = flags,
	};

	q.len = strlen(q.text);
	wire_query_encode(&q, w);
}

int main(void)
{
	struct wbuf w = { 0 };
	struct wire_query q;
	char why[256] = "";

	encode(WIRE_QF_PROBE, &w);
	ok(!wire_query_decode(w.p, w.len, &q, why, sizeof(why)), "QUERY with the probe flag: decoded");
	is_int((int)q.flags, WIRE_QF_PROBE, "... the flag is there");
	is_int((int)q.qid, 7, "... the qid");
	ok(q.len == strlen("from s in cluster.syscall(\"read\") select count()"), "... the text");
	wbuf_free(&w);

	encode(0, &w);
	ok(!wire_query_decode(w.p, w.len, &q, why, sizeof(why)), "QUERY without: decoded");
	is_int((int)q.flags, 0, "... no flag");
	/* a collector before #20: the same frame without its last byte */
	ok(!wire_query_decode(w.p, w.len - 1, &q, why, sizeof(why)),
	   "a QUERY of a collector before #20 (no flags byte): decoded");
	is_int((int)q.flags, 0, "... as no flag");
	wbuf_u8(&w, 0);
	ok(wire_query_decode(w.p, w.len, &q, why, sizeof(why)) == -EBADMSG,
	   "a byte after the flags: refused");
	diag("%s", why);
	wbuf_free(&w);
	return test_done();
}
