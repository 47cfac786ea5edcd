// SPDX-License-Identifier: MIT
/*
 * The wire module (src/common/wire*.c): every frame type round trips
 * through the encoder, a real socket and the reader; every truncation and
 * every corrupted byte of a frame is refused with a reason; every payload
 * field a decoder checks is refused by name when wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/err.h"
#include "common/wire.h"
#include "test.h"

/* The first frame of b as a decoder sees it (no socket). */
static struct wire_frame frame_at(const struct wire_buf *b)
{
	struct wire_frame f;

	memcpy(&f.h, b->p + b->off, sizeof(f.h));
	f.payload = b->p + b->off + FAY_WIRE_HDR_SIZE;
	return f;
}

/* A frame with a raw payload (for the decoders' damage cases). */
static struct wire_frame raw(struct wire_buf *b, unsigned type, uint64_t seq, const char *json)
{
	wire_buf_reset(b);
	wire_put_frame(b, type, seq, json, (uint32_t)strlen(json));
	return frame_at(b);
}

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		skip_all("socketpair: %s", strerror(errno));
}

/* Write n bytes to a fresh socket, close the writing side, read one
 * frame: the reader's verdict (1, or the error), err filled. */
static int read_bytes(const void *p, size_t n, uint32_t max, struct wire_frame *f,
		      char *err, size_t errlen, struct wire_reader *keep)
{
	struct wire_reader r;
	int sv[2], ret;

	pair(sv);
	if (n && write(sv[0], p, n) != (ssize_t)n)
		return -EIO;
	shutdown(sv[0], SHUT_WR);
	wire_reader_init(&r, max);
	err[0] = '\0';
	do {
		ret = wire_read(&r, sv[1], f, err, errlen);
	} while (ret == 0);
	close(sv[0]);
	close(sv[1]);
	if (keep)
		*keep = r;
	else
		wire_reader_free(&r);
	return ret;
}

static void test_round_trips(void)
{
	struct wire_hello h = { 0 }, h2;
	struct wire_welcome w = { .last_seq = 123456789012ull }, w2;
	struct wire_ack a = { .seq = 9, .stored = 7, .rejected = 2, .duplicate = 1 }, a2;
	struct wire_nack n = { .seq = 10 }, n2;
	struct wire_error e, e2;
	struct wire_stats s = { .json = (char *)"{ \"rings\": 3, \"lost\": {\"x\": 1} }" }, s2;
	struct wire_buf b = { 0 };
	struct wire_reader r;
	struct wire_frame f;
	char err[256];
	int sv[2], ret, nf = 0;

	snprintf(h.agent_id, sizeof(h.agent_id), "0123456789ABCDEF0123456789abcdef");
	snprintf(h.host, sizeof(h.host), "host-\"quoted\"\\\u00e9");
	snprintf(h.version, sizeof(h.version), "0.1.0");
	snprintf(h.token, sizeof(h.token), "s3cret");
	snprintf(h.role, sizeof(h.role), "query");
	h.collector = 1;
	snprintf(w.version, sizeof(w.version), "9.9");
	snprintf(n.error, sizeof(n.error), "store busy: \"disk\"\n");
	snprintf(e.error, sizeof(e.error), "HELLO: wrong token");
	s.len = strlen(s.json);

	is_int(wire_put_hello(&b, &h), 0, "HELLO encoded");
	is_int(wire_put_welcome(&b, &w), 0, "WELCOME encoded");
	is_int(wire_put_ack(&b, &a), 0, "ACK encoded");
	is_int(wire_put_nack(&b, &n), 0, "NACK encoded");
	is_int(wire_put_error(&b, &e), 0, "ERROR encoded");
	is_int(wire_put_stats(&b, &s), 0, "STATS encoded");

	/* All six through a real socket, then read back one by one. */
	pair(sv);
	is_int(wire_buf_flush(&b, sv[0]), 0, "flushed");
	is_int(wire_buf_pending(&b), 0, "nothing pending");
	wire_reader_init(&r, FAY_WIRE_MAX_PAYLOAD);
	while ((ret = wire_read(&r, sv[1], &f, err, sizeof(err))) == 1) {
		nf++;
		switch (f.h.type) {
		case WIRE_HELLO:
			is_int(wire_get_hello(&f, &h2, err, sizeof(err)), 0, "HELLO decoded");
			is_str(h2.agent_id, "0123456789abcdef0123456789abcdef", "agent id, lower case");
			is_str(h2.host, h.host, "host with quotes, backslash, UTF-8");
			is_str(h2.version, "0.1.0", "version");
			is_str(h2.token, "s3cret", "token");
			ok(!strcmp(h2.role, "query") && h2.collector == 1, "role query, collector");
			break;
		case WIRE_WELCOME:
			is_int(wire_get_welcome(&f, &w2, err, sizeof(err)), 0, "WELCOME decoded");
			is_u64(w2.last_seq, 123456789012ull, "last_seq");
			is_str(w2.version, "9.9", "version");
			break;
		case WIRE_ACK:
			is_int(wire_get_ack(&f, &a2, err, sizeof(err)), 0, "ACK decoded");
			ok(a2.seq == 9 && a2.stored == 7 && a2.rejected == 2 && a2.duplicate == 1,
			   "ACK fields");
			break;
		case WIRE_NACK:
			is_int(wire_get_nack(&f, &n2, err, sizeof(err)), 0, "NACK decoded");
			ok(n2.seq == 10 && !strcmp(n2.error, n.error), "NACK seq and reason");
			break;
		case WIRE_ERROR:
			is_int(wire_get_error(&f, &e2, err, sizeof(err)), 0, "ERROR decoded");
			is_str(e2.error, e.error, "ERROR reason");
			break;
		case WIRE_STATS:
			is_int(wire_get_stats(&f, &s2, err, sizeof(err)), 0, "STATS decoded");
			is_str(s2.json, "{\"rings\":3,\"lost\":{\"x\":1}}", "STATS compact");
			wire_stats_release(&s2);
			wire_stats_release(&s2);
			break;
		}
	}
	is_int(ret, 0, "then: nothing more for now");
	is_int(nf, 6, "six frames read");
	close(sv[0]);
	is_int(wire_read(&r, sv[1], &f, err, sizeof(err)), -ENOTCONN, "peer closed between frames: -ENOTCONN");
	close(sv[1]);
	wire_reader_free(&r);

	/* A token or role of "" and collector 0 are not sent at all. */
	wire_buf_reset(&b);
	h.token[0] = '\0';
	h.role[0] = '\0';
	h.collector = 0;
	wire_put_hello(&b, &h);
	f = frame_at(&b);
	ok(!memmem(f.payload, f.h.len, "token", 5) && !memmem(f.payload, f.h.len, "role", 4) &&
	   !memmem(f.payload, f.h.len, "collector", 9), "empty token, role: no such members");
	is_int(wire_get_hello(&f, &h2, err, sizeof(err)), 0, "decoded");
	ok(!h2.token[0] && !h2.role[0] && !h2.collector, "token and role empty, not a collector");

	/* Reasons are sent as UTF-8 whatever they hold; other strings must be. */
	{
		static const struct { const char *in, *out; } u[] = {
			{ "bad \xff byte", "bad ? byte" },
			{ "cut \xc3", "cut ?" },
			{ "overlong \xc0\xaf", "overlong ??" },
			{ "surrogate \xed\xa0\x80", "surrogate ???" },
			{ "above \xf4\x90\x80\x80", "above ????" },
			{ "fine \xc3\xa9 \xf0\x9f\x98\x80", "fine \xc3\xa9 \xf0\x9f\x98\x80" },
		};

		for (size_t i = 0; i < ARRAY_SIZE(u); i++) {
			wire_buf_reset(&b);
			snprintf(e.error, sizeof(e.error), "%s", u[i].in);
			ret = wire_put_error(&b, &e);
			f = frame_at(&b);
			ok(!ret && !wire_get_error(&f, &e2, err, sizeof(err)) &&
			   !strcmp(e2.error, u[i].out), "ERROR reason sent as '%s'", u[i].out);
		}
		wire_buf_reset(&b);
		snprintf(n.error, sizeof(n.error), "busy \xfe");
		ret = wire_put_nack(&b, &n);
		f = frame_at(&b);
		ok(!ret && !wire_get_nack(&f, &n2, err, sizeof(err)) && !strcmp(n2.error, "busy ?"),
		   "NACK reason cleaned too");
		snprintf(h.host, sizeof(h.host), "h\xff");
		is_int(wire_put_hello(&b, &h), -EINVAL, "a host name that is not UTF-8: -EINVAL");
	}

	/* Encoders refuse what no decoder would take. */
	is_int(wire_put_ack(&b, &(struct wire_ack){ .seq = 0 }), -EINVAL, "ACK seq 0 refused");
	is_int(wire_put_nack(&b, &(struct wire_nack){ .seq = 0 }), -EINVAL, "NACK seq 0 refused");
	is_int(wire_put_welcome(&b, &(struct wire_welcome){ .last_seq = UINT64_MAX }), -EINVAL,
	       "WELCOME last_seq beyond JSON integers refused");
	wire_buf_free(&b);
	wire_buf_free(&b);
	wire_buf_free(NULL);
}

/* One frame per type, to be damaged. */
static void sample_frames(struct wire_buf *b)
{
	struct wire_hello h = { .agent_id = "0123456789abcdef0123456789abcdef", .host = "h" };
	struct wire_batch bt;
	uint8_t *rec;

	wire_put_hello(b, &h);
	wire_put_welcome(b, &(struct wire_welcome){ .last_seq = 3 });
	wire_batch_init(&bt, 256, 8);
	wire_batch_reserve(&bt, 5, &rec);
	memcpy(rec, "abcde", 5);
	wire_batch_reserve(&bt, 0, &rec);
	wire_put_frame(b, WIRE_BATCH, 4, bt.buf + FAY_WIRE_HDR_SIZE, bt.len);
	wire_batch_free(&bt);
	wire_put_ack(b, &(struct wire_ack){ .seq = 4, .stored = 2 });
	wire_put_nack(b, &(struct wire_nack){ .seq = 5, .error = "busy" });
	wire_put_stats(b, &(struct wire_stats){ .json = (char *)"{}", .len = 2 });
	wire_put_error(b, &(struct wire_error){ .error = "no" });
}

static void test_damage(void)
{
	struct wire_buf b = { 0 };
	struct wire_frame f;
	char err[256];
	size_t off = 0;
	int nframes = 0, trunc_ok = 1, flip_ok = 1, named = 1;

	sample_frames(&b);
	while (off < b.len) {
		struct wire_hdr h;
		size_t n;
		uint8_t *copy;

		memcpy(&h, b.p + off, sizeof(h));
		n = FAY_WIRE_HDR_SIZE + h.len;
		copy = malloc(n);
		nframes++;
		is_int(read_bytes(b.p + off, n, FAY_WIRE_MAX_PAYLOAD, &f, err, sizeof(err), NULL), 1,
		       "%s frame intact: read", wire_type_name(h.type));
		/* Every truncation: never a frame; a clean -ENOTCONN only at 0. */
		for (size_t cut = 0; cut < n; cut++) {
			int ret = read_bytes(b.p + off, cut, FAY_WIRE_MAX_PAYLOAD, &f, err,
					     sizeof(err), NULL);

			if (ret != (cut ? -ECONNRESET : -ENOTCONN)) {
				diag("%s cut at %zu: %d (%s)", wire_type_name(h.type), cut, ret, err);
				trunc_ok = 0;
			}
			if (cut && !strstr(err, "inside a frame"))
				named = 0;
		}
		/* Every byte corrupted (each bit pattern change caught by the
		 * header checks, the length or the crc). */
		for (size_t i = 0; i < n; i++) {
			for (int bit = 0; bit < 8; bit += 3) {
				int ret;

				memcpy(copy, b.p + off, n);
				copy[i] ^= (uint8_t)(1u << bit);
				ret = read_bytes(copy, n, FAY_WIRE_MAX_PAYLOAD, &f, err,
						 sizeof(err), NULL);
				if (ret != -EPROTO && ret != -EBADMSG && ret != -ECONNRESET) {
					diag("%s byte %zu bit %d: %d", wire_type_name(h.type), i, bit, ret);
					flip_ok = 0;
				}
				if ((ret == -EPROTO || ret == -EBADMSG) && !err[0])
					named = 0;
			}
		}
		free(copy);
		off += n;
	}
	is_int(nframes, 7, "one frame of each of the 7 types");
	ok(trunc_ok, "every truncation of every frame: -ECONNRESET, never a frame");
	ok(flip_ok, "every corrupted byte of every frame: refused");
	ok(named, "every refusal has a reason");

	/* The reasons, one per check. */
	{
		struct wire_hdr h;
		uint8_t fr[FAY_WIRE_HDR_SIZE + 2];

		wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
		memcpy(fr + FAY_WIRE_HDR_SIZE, "{}", 2);
		h.magic ^= 1;
		memcpy(fr, &h, sizeof(h));
		is_int(read_bytes(fr, sizeof(fr), 1024, &f, err, sizeof(err), NULL), -EPROTO, "bad magic");
		ok(strstr(err, "bad magic") != NULL, "  %s", err);
		wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
		h.version = 7;
		memcpy(fr, &h, sizeof(h));
		is_int(read_bytes(fr, sizeof(fr), 1024, &f, err, sizeof(err), NULL), -EPROTO, "version");
		ok(strstr(err, "protocol version 7") != NULL, "  %s", err);
		wire_hdr_init(&h, WIRE_TYPE_MAX, 0, "{}", 2);
		memcpy(fr, &h, sizeof(h));
		is_int(read_bytes(fr, sizeof(fr), 1024, &f, err, sizeof(err), NULL), -EPROTO, "type");
		ok(strstr(err, "unknown frame type") != NULL, "  %s", err);
		wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
		h.len = FAY_WIRE_MAX_PAYLOAD + 1;
		memcpy(fr, &h, sizeof(h));
		is_int(read_bytes(fr, sizeof(fr), FAY_WIRE_MAX_PAYLOAD, &f, err, sizeof(err), NULL),
		       -EPROTO, "length over the protocol limit");
		ok(strstr(err, "exceeds") != NULL, "  %s", err);
		wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
		memcpy(fr, &h, sizeof(h));
		is_int(read_bytes(fr, sizeof(fr), 1, &f, err, sizeof(err), NULL), -EPROTO,
		       "length over this reader's limit");
		ok(strstr(err, "this side accepts") != NULL, "  %s", err);
		fr[FAY_WIRE_HDR_SIZE] = '[';
		is_int(read_bytes(fr, sizeof(fr), 1024, &f, err, sizeof(err), NULL), -EBADMSG, "crc");
		ok(strstr(err, "checksum") != NULL, "  %s", err);
	}
	is_int(wire_reader_init(&(struct wire_reader){ 0 }, 0), -EINVAL, "reader limit 0 refused");
	is_int(wire_reader_init(&(struct wire_reader){ 0 }, FAY_WIRE_MAX_PAYLOAD + 1), -EINVAL,
	       "reader limit over the protocol's refused");
	wire_buf_free(&b);
}

/* Byte by byte, and two frames in one write. */
static void test_reader_stream(void)
{
	struct wire_buf b = { 0 };
	struct wire_reader r;
	struct wire_frame f;
	struct wire_ack a;
	char err[256];
	int sv[2], ret, zeros = 0, frames = 0;

	for (uint64_t s = 1; s <= 3; s++)
		wire_put_ack(&b, &(struct wire_ack){ .seq = s, .stored = s * 10 });
	pair(sv);
	wire_reader_init(&r, 1024);
	for (size_t i = 0; i < b.len; i++) {
		if (write(sv[0], b.p + i, 1) != 1)
			break;
		while ((ret = wire_read(&r, sv[1], &f, err, sizeof(err))) == 1) {
			frames++;
			if (wire_get_ack(&f, &a, err, sizeof(err)) || a.seq != (uint64_t)frames ||
			    a.stored != (uint64_t)frames * 10)
				frames = -100;
		}
		zeros += ret == 0;
		if (ret == 0 && i + 1 < b.len && wire_reader_partial(&r) == 0 && frames == 0)
			zeros = -1000;
	}
	is_int(frames, 3, "byte by byte: 3 frames, in order, intact");
	ok(zeros > 0, "0 (need more) while incomplete");
	is_int(wire_reader_partial(&r), 0, "nothing partial at the end");

	/* All three at once: returned one per call. */
	is_int(write(sv[0], b.p, b.len), (long long)b.len, "three frames in one write");
	for (frames = 0; wire_read(&r, sv[1], &f, err, sizeof(err)) == 1; frames++)
		;
	is_int(frames, 3, "one frame per call");
	close(sv[0]);
	close(sv[1]);
	wire_reader_free(&r);
	wire_reader_free(NULL);

	/* A full socket: -EAGAIN, then the rest once the peer reads. */
	{
		struct wire_buf big = { 0 };
		static uint8_t payload[256 << 10];
		size_t got = 0;
		uint8_t sink[65536];
		int flushed = 0;

		pair(sv);
		wire_put_frame(&big, WIRE_STATS, 0, payload, sizeof(payload));
		is_int(wire_buf_flush(&big, sv[0]), -EAGAIN, "a full socket: -EAGAIN");
		ok(wire_buf_pending(&big) > 0, "bytes left pending");
		while (!flushed) {
			ssize_t n = read(sv[1], sink, sizeof(sink));

			if (n <= 0)
				break;
			got += (size_t)n;
			flushed = wire_buf_flush(&big, sv[0]) == 0;
		}
		ok(flushed, "flushed after the peer read");
		while (got < FAY_WIRE_HDR_SIZE + sizeof(payload)) {
			ssize_t n = read(sv[1], sink, sizeof(sink));

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		is_int(got, FAY_WIRE_HDR_SIZE + sizeof(payload), "every byte arrived");
		close(sv[1]);
		wire_put_frame(&big, WIRE_STATS, 0, "{}", 2);
		is_int(wire_buf_flush(&big, sv[0]), -EPIPE, "peer gone: -EPIPE");
		close(sv[0]);
		big.max = 100;
		wire_buf_reset(&big);
		is_int(wire_put_frame(&big, WIRE_STATS, 0, payload, 100), -ENOBUFS,
		       "over the buffer's max: -ENOBUFS");
		is_int(wire_buf_pending(&big), 0, "nothing appended");
		is_int(wire_put_frame(&big, WIRE_STATS, 0, payload, FAY_WIRE_MAX_PAYLOAD + 1),
		       -EMSGSIZE, "over the protocol's payload limit: -EMSGSIZE");
		wire_buf_free(&big);
	}
	wire_buf_free(&b);
}

/* Decoders: each field checked, named when wrong. */
static void test_decoders(void)
{
	struct wire_buf b = { 0 };
	struct wire_frame f;
	struct wire_hello h;
	struct wire_welcome w;
	struct wire_ack a;
	struct wire_nack n;
	struct wire_error e;
	struct wire_stats s;
	char err[256], big[600];
	int ret;
	static const struct {
		unsigned type;
		uint64_t seq;
		const char *json;
		int want;
		const char *reason;
	} cases[] = {
		{ WIRE_HELLO, 0, "not json", -EBADMSG, "not JSON" },
		{ WIRE_HELLO, 0, "[1]", -EBADMSG, "not a JSON object" },
		{ WIRE_HELLO, 0, "{}", -EBADMSG, "\"agent_id\" is missing" },
		{ WIRE_HELLO, 0, "{\"agent_id\":5}", -EBADMSG, "\"agent_id\" is not a string" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123\"}", -EBADMSG, "32 hex digits" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdeg\"}", -EBADMSG,
		  "32 hex digits" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"host\":1}",
		  -EBADMSG, "\"host\" is not a string" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"host\":\"a\\u0000b\"}",
		  -EBADMSG, "NUL" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"version\":[]}",
		  -EBADMSG, "\"version\" is not a string" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"token\":null}",
		  -EBADMSG, "\"token\" is not a string" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"agent_id\":\"0123456789abcdef0123456789abcdef\"}",
		  -EBADMSG, "duplicate" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"collector\":\"yes\"}",
		  -EBADMSG, "\"collector\" is not true or false" },
		{ WIRE_HELLO, 0, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"role\":\"a-role-too-long-x\"}",
		  -EBADMSG, "\"role\" is 17 bytes long, at most 15" },
		{ WIRE_HELLO, 3, "{\"agent_id\":\"0123456789abcdef0123456789abcdef\"}", -EPROTO,
		  "seq 3" },
		{ WIRE_WELCOME, 0, "{\"version\":\"x\"}", -EBADMSG, "\"last_seq\" is missing" },
		{ WIRE_WELCOME, 0, "{\"last_seq\":-1}", -EBADMSG, "\"last_seq\" is not an integer >= 0" },
		{ WIRE_WELCOME, 0, "{\"last_seq\":1.5}", -EBADMSG, "\"last_seq\" is not an integer" },
		{ WIRE_ACK, 0, "{\"stored\":1,\"rejected\":0,\"duplicate\":false}", -EPROTO,
		  "must be at least 1" },
		{ WIRE_ACK, 1, "{}", -EBADMSG, "\"stored\" is missing" },
		{ WIRE_ACK, 1, "{\"stored\":1}", -EBADMSG, "\"rejected\" is missing" },
		{ WIRE_ACK, 1, "{\"stored\":1,\"rejected\":0}", -EBADMSG, "\"duplicate\" is missing" },
		{ WIRE_ACK, 1, "{\"stored\":1,\"rejected\":0,\"duplicate\":1}", -EBADMSG,
		  "\"duplicate\" is not true or false" },
		{ WIRE_ACK, 1, "{\"stored\":\"1\",\"rejected\":0,\"duplicate\":true}", -EBADMSG,
		  "\"stored\" is not an integer" },
		{ WIRE_NACK, 2, "{}", -EBADMSG, "\"error\" is missing" },
		{ WIRE_NACK, 0, "{\"error\":\"x\"}", -EPROTO, "must be at least 1" },
		{ WIRE_ERROR, 0, "{\"error\":false}", -EBADMSG, "\"error\" is not a string" },
		{ WIRE_STATS, 0, "17", -EBADMSG, "not a JSON object" },
		{ WIRE_STATS, 0, "{\"a\":", -EBADMSG, "not JSON" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		ret = -1;
		f = raw(&b, cases[i].type, cases[i].seq, cases[i].json);
		err[0] = '\0';
		switch (cases[i].type) {
		case WIRE_HELLO: ret = wire_get_hello(&f, &h, err, sizeof(err)); break;
		case WIRE_WELCOME: ret = wire_get_welcome(&f, &w, err, sizeof(err)); break;
		case WIRE_ACK: ret = wire_get_ack(&f, &a, err, sizeof(err)); break;
		case WIRE_NACK: ret = wire_get_nack(&f, &n, err, sizeof(err)); break;
		case WIRE_ERROR: ret = wire_get_error(&f, &e, err, sizeof(err)); break;
		case WIRE_STATS:
			ret = wire_get_stats(&f, &s, err, sizeof(err));
			wire_stats_release(&s);
			break;
		}
		ok(ret == cases[i].want && strstr(err, cases[i].reason) &&
		   !strncmp(err, wire_type_name(cases[i].type), strlen(wire_type_name(cases[i].type))),
		   "%s %s: refused (%s)", wire_type_name(cases[i].type), cases[i].json, err);
	}

	/* Too long for its field. */
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	{
		char json[800];

		snprintf(json, sizeof(json), "{\"agent_id\":\"0123456789abcdef0123456789abcdef\",\"host\":\"%.300s\"}", big);
		f = raw(&b, WIRE_HELLO, 0, json);
		ret = wire_get_hello(&f, &h, err, sizeof(err));
		ok(ret == -EBADMSG && strstr(err, "at most 255"), "host of 300 bytes refused (%s)", err);
		snprintf(json, sizeof(json), "{\"error\":\"%s\"}", big);
		f = raw(&b, WIRE_NACK, 1, json);
		ret = wire_get_nack(&f, &n, err, sizeof(err));
		ok(ret == -EBADMSG && strstr(err, "at most 511"), "reason of 599 bytes refused (%s)", err);
	}
	/* The wrong decoder for a frame. */
	f = raw(&b, WIRE_WELCOME, 0, "{\"last_seq\":1}");
	ret = wire_get_hello(&f, &h, err, sizeof(err));
	ok(ret == -EPROTO && strstr(err, "got WELCOME"), "a WELCOME is not a HELLO (%s)", err);
	/* Unknown members are ignored (a newer peer may add some). */
	f = raw(&b, WIRE_WELCOME, 0, "{\"last_seq\":4,\"future\":{\"x\":[1]}}");
	ok(wire_get_welcome(&f, &w, err, sizeof(err)) == 0 && w.last_seq == 4,
	   "unknown members ignored");
	wire_buf_free(&b);
}

static int count_cb(void *ctx, const void *rec, uint32_t len)
{
	(*(int *)ctx)++;
	return len == 3 ? -ECANCELED : 0;
}

static void test_batch(void)
{
	struct wire_batch b;
	struct wire_batch_rd rd;
	struct wire_frame f;
	struct wire_hdr h;
	const uint8_t *rec;
	uint8_t *p;
	uint32_t flen, rl, n = 0;
	char err[256];
	int ret, all = 1, seen = 0;

	is_int(wire_batch_init(&b, 2, 8), -EINVAL, "payload cap under 4 refused");
	wire_batch_free(&b);
	is_int(wire_batch_init(&b, 64, 0), -EINVAL, "max_count 0 refused");
	wire_batch_free(&b);
	is_int(wire_batch_init(&b, 64, 3), 0, "batch of 64 bytes, 3 records");
	is_int(wire_batch_reserve(&b, 61, &p), -E2BIG, "a record bigger than any batch: -E2BIG");
	for (uint32_t i = 0; i < 3; i++) {
		ret = wire_batch_reserve(&b, i + 1, &p);
		memset(p, 'a' + (int)i, i + 1);
	}
	is_int(ret, 0, "three records");
	is_int(wire_batch_reserve(&b, 1, &p), -ENOSPC, "full by count: -ENOSPC");
	ok(wire_batch_walk(b.buf + FAY_WIRE_HDR_SIZE, b.len, NULL, NULL, err, sizeof(err)) == 3,
	   "an unsealed batch's payload is already well formed");
	flen = wire_batch_seal(&b, 42);
	memcpy(&h, b.buf, sizeof(h));
	f.h = h;
	f.payload = b.buf + FAY_WIRE_HDR_SIZE;
	ok(flen == FAY_WIRE_HDR_SIZE + 4 + 3 * 4 + 6 && h.type == WIRE_BATCH && h.seq == 42 &&
	   !wire_hdr_check(&h, err, sizeof(err)) && !wire_crc_check(&h, f.payload, err, sizeof(err)),
	   "sealed: a valid BATCH frame of %u bytes", flen);
	is_int(wire_get_batch(&f, &rd, err, sizeof(err)), 0, "opened");
	is_int(rd.count, 3, "count 3");
	while ((ret = wire_batch_next(&rd, &rec, &rl, err, sizeof(err))) == 1) {
		if (rl != n + 1 || rec[0] != 'a' + n || rec[rl - 1] != 'a' + n)
			all = 0;
		n++;
	}
	ok(ret == 0 && n == 3 && all, "records back in order, intact");
	is_int(wire_batch_walk(f.payload, h.len, count_cb, &seen, err, sizeof(err)), -ECANCELED,
	       "the callback's error stops the walk");
	is_int(seen, 3, "after the third record");

	/* Every truncation of the payload. */
	all = 1;
	for (uint32_t cut = 0; cut < h.len; cut++)
		if (wire_batch_walk(f.payload, cut, NULL, NULL, err, sizeof(err)) != -EBADMSG || !err[0])
			all = 0;
	ok(all, "every truncation: -EBADMSG with a reason");
	ret = wire_batch_walk(f.payload, 2, NULL, NULL, err, sizeof(err));
	ok(strstr(err, "no span count") != NULL, "cut in the count: %s", err);
	ret = wire_batch_walk(f.payload, 17, NULL, NULL, err, sizeof(err));
	ok(strstr(err, "span 2 of 3") && strstr(err, "cut short at byte 15"), "cut in a length: %s", err);
	ret = wire_batch_walk(f.payload, h.len - 1, NULL, NULL, err, sizeof(err));
	ok(strstr(err, "span 2 of 3") && strstr(err, "runs past"), "cut in a record: %s", err);

	/* Count damage, trailing bytes, seq 0, the wrong frame. */
	{
		uint8_t pl[64];
		uint32_t c = 1000;

		memcpy(pl, f.payload, h.len);
		memcpy(pl, &c, 4);
		ret = wire_batch_open(&rd, pl, h.len, 42, err, sizeof(err));
		ok(ret == -EBADMSG && strstr(err, "BATCH seq 42: span count 1000 cannot fit"),
		   "implausible count: %s", err);
		c = 2;
		memcpy(pl, &c, 4);
		ret = wire_batch_walk(pl, h.len, NULL, NULL, err, sizeof(err));
		ok(ret == -EBADMSG && strstr(err, "bytes after the last of 2 spans"),
		   "trailing bytes: %s", err);
		f.h.seq = 0;
		ret = wire_get_batch(&f, &rd, err, sizeof(err));
		ok(ret == -EPROTO && strstr(err, "seq 0"), "BATCH seq 0 refused: %s", err);
		f.h.type = WIRE_ACK;
		f.h.seq = 1;
		ret = wire_get_batch(&f, &rd, err, sizeof(err));
		ok(ret == -EPROTO && strstr(err, "got ACK"), "an ACK is not a BATCH: %s", err);
	}
	wire_batch_reset(&b);
	is_int(wire_batch_walk(b.buf + FAY_WIRE_HDR_SIZE, b.len, NULL, NULL, err, sizeof(err)), 0,
	       "reset: an empty, well-formed batch");
	wire_batch_free(&b);
	wire_batch_free(NULL);
	is_str(wire_type_name(0), "?", "type 0 has no name");
	is_str(wire_type_name(WIRE_TYPE_MAX), "?", "unknown type has no name");
}

/* The blocking calls of the query connections: exact reads (the next
 * frame stays in the socket for whoever reads next), timeouts, EOF. */
static void test_blocking(void)
{
	struct wire_buf b = { 0 };
	struct wire_reader r;
	struct wire_frame f;
	struct wire_hdr h;
	unsigned char *buf = NULL;
	size_t cap = 0;
	char why[256];
	int sv[2];

	pair(sv);
	is_int(wire_send_frame(sv[0], WIRE_BEAT, 0, NULL, 0), 0, "an empty frame sent");
	is_int(wire_send_frame(sv[0], WIRE_STATS, 0, "{\"a\":1}", 7), 0, "a STATS frame sent");
	wire_put_ack(&b, &(struct wire_ack){ .seq = 5, .stored = 1 });
	is_int(wire_buf_send(&b, sv[0]), 0, "an ACK sent from a wire_buf");
	is_int(wire_buf_pending(&b), 0, "the buffer is empty after");
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 1000, why, sizeof(why)), 0, "BEAT received");
	ok(h.type == WIRE_BEAT && h.len == 0, "type BEAT, empty");
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 1000, why, sizeof(why)), 0, "STATS received");
	ok(h.type == WIRE_STATS && h.len == 7 && !memcmp(buf, "{\"a\":1}", 7),
	   "payload at the start of the buffer");
	/* What follows is still in the socket: another reader gets it. */
	wire_reader_init(&r, 1024);
	ok(wire_read(&r, sv[1], &f, why, sizeof(why)) == 1 && f.h.type == WIRE_ACK && f.h.seq == 5,
	   "exact reads: the next frame is left for another reader");
	wire_reader_free(&r);
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 100, why, sizeof(why)), -ETIMEDOUT,
	       "nothing within the timeout: -ETIMEDOUT");
	wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
	h.crc ^= 1;
	if (write(sv[0], &h, sizeof(h)) != sizeof(h) || write(sv[0], "{}", 2) != 2)
		diag("short write");
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 1000, why, sizeof(why)), -EBADMSG,
	       "bad crc: -EBADMSG");
	ok(strstr(why, "checksum") != NULL, "  %s", why);
	wire_hdr_init(&h, WIRE_STATS, 0, "{}", 2);
	if (write(sv[0], &h, 10) != 10)
		diag("short write");
	close(sv[0]);
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 1000, why, sizeof(why)), -ECONNRESET,
	       "EOF inside a frame: -ECONNRESET");
	close(sv[1]);
	pair(sv);
	close(sv[0]);
	is_int(wire_recv_frame(sv[1], &h, &buf, &cap, 1000, why, sizeof(why)), 1,
	       "EOF between frames: 1");
	is_int(wire_send_frame(sv[1], WIRE_BEAT, 0, NULL, 0), -EPIPE, "send to a closed peer: -EPIPE");
	close(sv[1]);
	free(buf);
	wire_buf_free(&b);
}

int main(void)
{
	test_round_trips();
	test_damage();
	test_reader_stream();
	test_decoders();
	test_batch();
	test_blocking();
	return test_done();
}
