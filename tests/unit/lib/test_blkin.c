// SPDX-License-Identifier: MIT
/*
 * ceph/blkin compatibility, written like BlkKin's own example: process A
 * (client) and process B (server, a fork child) talk over a socket; A
 * records cs, a key-value and cr, sends its trace info packed; B makes a
 * child span of it and records sr, an integer key-value and ss.  Both shm
 * files are then read back: one partial span record per annotation, with
 * the ids, name, endpoint and annotation BlkKin would have logged.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <fay/blkin.h>
#include <fay/trace.h>

#include "libtest.h"

struct message {
	char text[20];
	struct blkin_trace_info_packed info;
};

static void server(int s)
{
	struct blkin_endpoint ep;
	struct blkin_trace t;
	struct blkin_trace_info info;
	struct message m;
	int64_t out[2];

	blkin_init_endpoint(&ep, "10.0.0.2", 5001, "service b");
	if (recv(s, &m, sizeof(m), MSG_WAITALL) != sizeof(m))
		_exit(2);
	blkin_unpack_trace_info(&m.info, &info);
	blkin_init_child_info(&t, &info, &ep, "server op");
	BLKIN_TIMESTAMP(&t, &ep, SERVER_RECV);
	BLKIN_KEYVAL_INTEGER(&t, &ep, "bytes", 4096);
	BLKIN_TIMESTAMP(&t, &ep, SERVER_SEND);
	out[0] = t.info.span_id;
	out[1] = t.info.parent_span_id;
	if (send(s, out, sizeof(out), 0) != sizeof(out))
		_exit(3);
	_exit(0);
}

/* The records of one process's file. */
static void read_file(pid_t pid, struct lt_spans *sp)
{
	char path[PATH_MAX];
	struct lt_view v;

	memset(sp, 0, sizeof(*sp));
	if (lt_find(pid, path, sizeof(path)) != 1 || lt_map(path, &v))
		return;
	lt_read_all(&v, sp);
	lt_unmap(&v);
}

/* Check one partial record: flags, ids, name, endpoint; returns its
 * annotation item in *ann. */
static int partial_ok(const struct lt_span *s, const struct blkin_trace *t,
		      const char *ip, int port, const char *service,
		      struct spanrec_item *ann)
{
	struct spanrec_item ep;
	const struct spanrec *r = &s->r;

	if (r->f.flags != (SPAN_F_PARTIAL | SPAN_F_SAMPLED) || r->f.trace_hi ||
	    r->f.trace_lo != (uint64_t)t->info.trace_id ||
	    r->f.span_id != (uint64_t)t->info.span_id ||
	    r->f.parent_id != (uint64_t)t->info.parent_span_id ||
	    r->f.duration_ns != 0 || !lt_streq(r->name, t->name) ||
	    r->f.nitems != 3)
		return 0;
	if (!lt_item(r, SPAN_ITEM_LOCAL_EP, 0, &ep) || ep.val != (uint64_t)port ||
	    !lt_streq(ep.a, service) || !lt_streq(ep.b, ip))
		return 0;
	if (lt_item(r, SPAN_ITEM_EVENT, 0, ann) || lt_item(r, SPAN_ITEM_TAG, 0, ann) ||
	    lt_item(r, SPAN_ITEM_TAG_INT, 0, ann))
		return 1;
	return 0;
}

static void test_two_processes(void)
{
	struct blkin_endpoint ep;
	struct blkin_trace t;
	struct message m = { .text = "message" };
	struct lt_spans a, b;
	struct spanrec_item it;
	int64_t srv[2] = { 0, 0 };
	int sv[2], st = 0, okc = 1, oks = 1;
	pid_t pid;
	uint64_t ts[4] = { 0 };

	blkin_init_endpoint(&ep, "10.0.0.1", 5000, "service a");
	is_int(blkin_init_new_trace(&t, "client op", &ep), 0, "blkin_init_new_trace");
	ok(t.info.trace_id > 0 && t.info.span_id == t.info.trace_id &&
	   t.info.parent_span_id == 0, "root: span id = trace id > 0, parent 0");
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		server(sv[1]);
	}
	close(sv[1]);
	BLKIN_TIMESTAMP(&t, &ep, CLIENT_SEND);
	BLKIN_KEYVAL_STRING(&t, &ep, "object", "rbd.0001");
	blkin_pack_trace_info(&t.info, &m.info);
	send(sv[0], &m, sizeof(m), 0);
	if (recv(sv[0], srv, sizeof(srv), MSG_WAITALL) != sizeof(srv))
		ok(0, "server answered");
	BLKIN_TIMESTAMP(&t, &ep, CLIENT_RECV);
	close(sv[0]);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server process ran");

	read_file(getpid(), &a);
	read_file(pid, &b);
	is_int(a.n, 3, "client: 3 records (cs, key-value, cr)");
	is_int(b.n, 3, "server: 3 records in its own file (sr, key-value, ss)");
	is_int(a.bad + b.bad, 0, "all decode");
	for (size_t i = 0; i < a.n; i++) {
		if (!partial_ok(&a.v[i], &t, "10.0.0.1", 5000, "service a", &it)) {
			okc = 0;
			continue;
		}
		if (it.type == SPAN_ITEM_EVENT && lt_streq(it.a, "cs"))
			ts[0] = it.val;
		else if (it.type == SPAN_ITEM_EVENT && lt_streq(it.a, "cr"))
			ts[3] = it.val;
		else if (!(it.type == SPAN_ITEM_TAG && lt_streq(it.a, "object") &&
			   lt_streq(it.b, "rbd.0001")))
			okc = 0;
		if (it.type == SPAN_ITEM_EVENT && it.val != a.v[i].r.f.start_ns)
			okc = 0;
	}
	ok(okc && ts[0] && ts[3], "client records: ids, name, endpoint, cs/object/cr");
	{
		struct blkin_trace bt = {
			.name = "server op",
			.info = { t.info.trace_id, srv[0], t.info.span_id },
		};

		ok(srv[1] == t.info.span_id && srv[0] > 0 && srv[0] != t.info.span_id,
		   "server's span: child of the client's, own id");
		for (size_t i = 0; i < b.n; i++) {
			if (!partial_ok(&b.v[i], &bt, "10.0.0.2", 5001, "service b", &it)) {
				oks = 0;
				continue;
			}
			if (it.type == SPAN_ITEM_EVENT && lt_streq(it.a, "sr"))
				ts[1] = it.val;
			else if (it.type == SPAN_ITEM_EVENT && lt_streq(it.a, "ss"))
				ts[2] = it.val;
			else if (!(it.type == SPAN_ITEM_TAG_INT && lt_streq(it.a, "bytes") &&
				   it.val == 4096))
				oks = 0;
		}
	}
	ok(oks && ts[1] && ts[2], "server records: ids, name, endpoint, sr/bytes/ss");
	ok(ts[0] <= ts[1] && ts[1] <= ts[2] && ts[2] <= ts[3], "cs <= sr <= ss <= cr");
	lt_spans_free(&a);
	lt_spans_free(&b);
}

static void test_api(void)
{
	struct blkin_endpoint ep, ep2, noip = { .ip = NULL, .port = 1, .name = "x" };
	struct blkin_trace t, c;
	struct blkin_annotation an;
	struct blkin_trace_info info, back;
	struct blkin_trace_info_packed pk;
	struct lt_spans sp;
	struct spanrec_item it;
	const uint8_t *bytes = (const uint8_t *)&pk;
	size_t n0;

	is_str(CLIENT_SEND, "cs", "CLIENT_SEND");
	is_str(CLIENT_RECV, "cr", "CLIENT_RECV");
	is_str(SERVER_SEND, "ss", "SERVER_SEND");
	is_str(SERVER_RECV, "sr", "SERVER_RECV");
	is_str(WIRE_SEND, "ws", "WIRE_SEND");
	is_str(SERVER_RECV_FRAGMENT, "srf", "SERVER_RECV_FRAGMENT");
	is_int(sizeof(struct blkin_trace_info_packed), 24, "packed info is 24 bytes");

	blkin_init_endpoint(&ep, NULL, -1, "svc");
	is_str(ep.ip, "NaN", "endpoint without ip gets \"NaN\"");
	is_int(ep.port, -1, "port is a signed 16-bit value");
	blkin_init_endpoint(&ep2, "192.168.1.9", 6789, "other");
	blkin_init_new_trace(&t, "op", &ep);

	/* the annotation's endpoint wins over the trace's */
	{
		char path[PATH_MAX];
		struct lt_view v;

		lt_find(getpid(), path, sizeof(path));
		lt_map(path, &v);
		lt_read_all(&v, &sp);
		n0 = sp.n;
		lt_spans_free(&sp);
		blkin_init_timestamp_annotation(&an, "ev", &ep2);
		is_int(blkin_record(&t, &an), 0, "blkin_record");
		blkin_init_integer_annotation(&an, "neg", -7, NULL);
		is_int(blkin_record(&t, &an), 0, "blkin_record with the trace's endpoint");
		lt_read_all(&v, &sp);
		ok(sp.n == n0 + 2 && lt_item(&sp.v[sp.n - 2].r, SPAN_ITEM_LOCAL_EP, 0, &it) &&
		   lt_streq(it.a, "other") && it.val == 6789 && lt_streq(it.b, "192.168.1.9"),
		   "annotation's endpoint recorded");
		ok(sp.n == n0 + 2 && lt_item(&sp.v[sp.n - 1].r, SPAN_ITEM_LOCAL_EP, 0, &it) &&
		   lt_streq(it.a, "svc") && it.val == 65535 && lt_item(&sp.v[sp.n - 1].r,
		   SPAN_ITEM_TAG_INT, 0, &it) && (int64_t)it.val == -7,
		   "trace's endpoint when the annotation has none; port as 16 bits; negative int");
		lt_spans_free(&sp);

		/* not sampled: the sign bit travels, nothing is recorded */
		fay_set_sampling(0);
		blkin_init_new_trace(&t, "unsampled", &ep);
		ok(t.info.trace_id < 0, "unsampled trace: negative trace id");
		blkin_init_child(&c, &t, NULL, "child");
		ok(c.info.trace_id == t.info.trace_id && c.endpoint == &ep,
		   "child keeps the trace id and the parent's endpoint");
		blkin_pack_trace_info(&c.info, &pk);
		blkin_unpack_trace_info(&pk, &back);
		ok(back.trace_id < 0, "... across pack/unpack");
		BLKIN_TIMESTAMP(&t, &ep, "x");
		BLKIN_KEYVAL_STRING(&c, &ep, "k", "v");
		n0 = (size_t)lt_records(&v);
		fay_set_sampling(1);
		BLKIN_TIMESTAMP(&c, &ep, "still not");
		is_u64(lt_records(&v), n0, "nothing recorded for an unsampled trace");
		blkin_init_new_trace(&t, "sampled", &ep);
		ok(t.info.trace_id > 0, "sampling back on: positive trace id");
		lt_unmap(&v);
	}

	/* pack: big-endian on the wire */
	info.trace_id = 0x0102030405060708;
	info.span_id = 0x1112131415161718;
	info.parent_span_id = 0x2122232425262728;
	is_int(blkin_pack_trace_info(&info, &pk), 0, "pack");
	ok(bytes[0] == 1 && bytes[7] == 8 && bytes[8] == 0x11 && bytes[23] == 0x28,
	   "packed big-endian");
	memset(&back, 0, sizeof(back));
	blkin_unpack_trace_info(&pk, &back);
	ok(!memcmp(&back, &info, sizeof(info)), "unpack round trip");
	blkin_set_trace_info(&c, &info);
	memset(&back, 0, sizeof(back));
	blkin_get_trace_info(&c, &back);
	ok(!memcmp(&back, &info, sizeof(info)), "set/get trace info");
	is_int(blkin_set_trace_properties(&c, &info, "renamed", &ep2), 0, "set properties");
	ok(!strcmp(c.name, "renamed") && c.endpoint == &ep2, "... name and endpoint");

	/* bad arguments */
	is_int(blkin_init_new_trace(NULL, "x", &ep), -EINVAL, "new trace NULL");
	is_int(blkin_init_child(&c, NULL, &ep, "x"), -EINVAL, "child of NULL");
	is_int(blkin_init_child_info(&c, &info, NULL, "x"), -EINVAL, "child info without endpoint");
	is_int(blkin_init_endpoint(NULL, "1", 1, "x"), -EINVAL, "endpoint NULL");
	is_int(blkin_init_string_annotation(&an, "k", NULL, &ep), -EINVAL, "string annotation NULL value");
	is_int(blkin_init_integer_annotation(&an, NULL, 1, &ep), -EINVAL, "integer annotation NULL key");
	is_int(blkin_init_timestamp_annotation(&an, NULL, &ep), -EINVAL, "timestamp NULL event");
	blkin_init_timestamp_annotation(&an, "e", NULL);
	is_int(blkin_record(NULL, &an), -EINVAL, "record NULL trace");
	is_int(blkin_record(&t, NULL), -EINVAL, "record NULL annotation");
	t.endpoint = &noip;
	is_int(blkin_record(&t, &an), -EINVAL, "record: endpoint without ip");
	t.endpoint = NULL;
	is_int(blkin_record(&t, &an), -EINVAL, "record: no endpoint at all");
	t.endpoint = &ep;
	t.name = NULL;
	is_int(blkin_record(&t, &an), -EINVAL, "record: trace without name");
	is_int(blkin_pack_trace_info(NULL, &pk), -EINVAL, "pack NULL");
	is_int(blkin_unpack_trace_info(&pk, NULL), -EINVAL, "unpack NULL");
}

int main(void)
{
	char path[PATH_MAX];
	struct lt_view v;

	lt_setup();
	unsetenv("FAY_SERVICE");
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_DISABLE");
	setenv("FAY_RINGS", "4", 1);
	is_int(blkin_init(), 0, "blkin_init");
	is_int(blkin_init(), 0, "blkin_init twice");
	is_int(lt_find(getpid(), path, sizeof(path)), 1, "blkin_init made the shm file");
	if (!lt_map(path, &v)) {
		is_str(v.hdr->service, program_invocation_short_name,
		       "service defaults to the program's name");
		lt_unmap(&v);
	}
	test_two_processes();
	test_api();
	return test_done();
}
