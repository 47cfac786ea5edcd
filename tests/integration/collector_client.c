// SPDX-License-Identifier: MIT
/*
 * fay-wire-client: a test client of the agent <-> collector protocol
 * (src/common/wire.h), for tests/integration/collector_*.sh and
 * bench/bench_ingest.  Built by mk/collector.mk.
 *
 *   fay-wire-client [-a ADDR] [-i AGENT_ID] [-t TOKEN] [-s SEQ] [-n BATCHES]
 *                   [-m SPANS] [-k SPANS_A_TRACE] [-c CONNS] [-W WINDOW] [-P USEC] [-d DB] [-H HOST]
 *                   [-T NS] [-w] [-q]
 *                   [-C CA [-E CERT -Y KEY]] CMD
 *
 * -C: TLS to the collector (common/tls.h), its certificate checked against
 * CA; -E/-Y: this client's certificate and key (mutual TLS).
 *
 * -T NS: the spans' time (nanoseconds since the epoch) instead of now, so
 * that the same batches can be sent to several collectors
 * (tests/integration/store_same_answers.sh).
 *
 * CMD:
 *   hello    HELLO, print "welcome last_seq=N"
 *   send     HELLO, then BATCHes seq SEQ.. (N of them, M spans each; the
 *            spans of batch S are trace (agent tag, S), ids 1..M; with
 *            -k K traces of K spans instead, shaped like real ones:
 *            random-looking 64-bit ids (a mix of S << 20 | j and the
 *            agent id, distinct for distinct traces),
 *            span ids 1..K, services SERVICE-0..19, 50 span names, a
 *            status-code tag, durations of 0.1-100 ms); prints
 *            "ack S stored=.. duplicate=.. rejected=.." per ACK as it
 *            arrives.  -w: after each ACK, read the store (-d DB, its own
 *            connection) and fail unless all M spans are already there
 *            (ACK only after COMMIT).  -c: that many agents in parallel
 *            (agent ids differ in the last digit).  -W: batches in flight.
 *            -P: a pause of USEC microseconds after each batch sent (a
 *            stream long enough to be interrupted mid-way under load).
 *            Prints "rate SPANS/s" at the end.
 *   dup      send batch SEQ twice: two ACKs, the second duplicate
 *   partial  one batch of BlkKin partial records (cs, sr, ss, cr, a
 *            custom annotation and a key-value) for trace (tag, SEQ)
 *   partial-split  the same records in two batches, SEQ (the client's
 *            cs and cr) and SEQ+1 (the server's), so the span is merged
 *            from records the collector received apart
 *   partial-instant  one batch of BlkKin partial records for trace (tag,
 *            SEQ) whose durations test Zipkin's duration rule: span 0x20
 *            client cs..cr 500 us with its server half's sr and ss in the
 *            same nanosecond; 0x21 a server span of 400 ns inside one
 *            microsecond; 0x22 a client span with cs = cr; 0x23 cr 1 us
 *            before cs (a clock step); 0x24 sr..ss 2.5 us
 *   badspan  a batch of 3 spans whose second is corrupt: ACK rejected=1
 *   stats    a STATS frame, then a HELLO round trip
 *   corrupt-crc | corrupt-magic | corrupt-len | corrupt-batch | batch-first
 *            a broken frame; prints "error MSG" and "closed" when the
 *            collector answers ERROR and closes
 *   check    (no network) for S in SEQ..SEQ+N-1 print "S COUNT": spans of
 *            trace (tag, S) in -d DB
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/spanrec.h"
#include "common/tls.h"
#include "common/wire.h"
#include "store/store.h"

static const char *addr = "127.0.0.1:9410", *token, *dbpath, *service = "wiretest";
static const char *hostname = "testhost";
static char agent_id[33] = "0123456789abcdef0123456789abcdef";
static uint64_t first_seq = 1;
static unsigned nbatches = 1, nspans = 10, nconns = 1, window = 8, pace_us;
static unsigned per_trace;   /* -k: spans a trace (0: the whole batch) */
static int verify, quiet;
static struct tls_conf *tls;
static uint64_t fixed_ns;   /* -T: the spans' time; 0: now */

static uint64_t span_time_ns(void)
{
	return fixed_ns ? fixed_ns : clock_realtime_ns();
}

static void die(const char *what)
{
	fprintf(stderr, "fay-wire-client: %s\n", what);
	exit(1);
}

static uint64_t agent_tag(const char *id)
{
	uint64_t v = 0;

	for (int i = 0; i < 16; i++) {
		char ch = id[i];

		v = v << 4 | (uint64_t)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
	}
	return v ? v : 1;
}

static int connect_to(const char *a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(a, ':');
	int fd, one = 1;

	if (!colon)
		die("address must be HOST:PORT");
	snprintf(host, sizeof(host), "%.*s", (int)(colon - a), a);
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		die("address must be an IPv4 HOST:PORT");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (tls) {
		char err[512];

		fd = tls_connect(tls, fd, host, err, sizeof(err));
		if (fd < 0) {
			fprintf(stderr, "fay-wire-client: TLS: %s\n", err);
			exit(1);
		}
	}
	return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return; /* the peer closed: the reader reports it */
		}
		p = (const char *)p + r;
		n -= (size_t)r;
	}
}

static void send_frame(int fd, unsigned type, uint64_t seq, const void *p, uint32_t len)
{
	struct wire_hdr h;

	wire_hdr_init(&h, type, seq, p, len);
	write_all(fd, &h, sizeof(h));
	if (len)
		write_all(fd, p, len);
}

static int read_all(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read one frame; payload NUL-terminated in buf.  -1: connection closed. */
static int read_frame(int fd, struct wire_hdr *h, char *buf, size_t cap)
{
	char err[256];

	if (read_all(fd, h, sizeof(*h)))
		return -1;
	if (wire_hdr_check(h, err, sizeof(err)) || h->len >= cap) {
		fprintf(stderr, "bad frame from the collector: %s\n", err);
		exit(1);
	}
	if (read_all(fd, buf, h->len))
		return -1;
	buf[h->len] = '\0';
	if (wire_crc_check(h, buf, err, sizeof(err))) {
		fprintf(stderr, "bad frame from the collector: %s\n", err);
		exit(1);
	}
	return 0;
}

/* Print what the collector says until it closes (after a broken frame). */
static int expect_error_close(int fd)
{
	struct wire_hdr h;
	char buf[4096];
	int got_error = 0;

	while (!read_frame(fd, &h, buf, sizeof(buf))) {
		printf("%s %s\n", h.type == WIRE_ERROR ? "error" : wire_type_name(h.type), buf);
		got_error |= h.type == WIRE_ERROR;
	}
	printf("closed\n");
	return got_error ? 0 : 1;
}

static uint64_t hello(int fd, const char *id)
{
	char p[1024], buf[4096], host[256];
	struct wire_hdr h;
	size_t k = 0;
	int n;
	const char *s;

	/* JSON-escape the host (-H may hold a newline) */
	for (s = hostname; *s && k < sizeof(host) - 3; s++) {
		if (*s == '\n' || *s == '"' || *s == '\\') {
			host[k++] = '\\';
			host[k++] = *s == '\n' ? 'n' : *s;
		} else {
			host[k++] = *s;
		}
	}
	host[k] = '\0';
	n = snprintf(p, sizeof(p), "{\"agent_id\":\"%s\",\"host\":\"%s\",\"version\":\"test\"%s%s%s}",
		     id, host, token ? ",\"token\":\"" : "", token ? token : "", token ? "\"" : "");
	send_frame(fd, WIRE_HELLO, 0, p, (uint32_t)n);
	if (read_frame(fd, &h, buf, sizeof(buf))) {
		printf("closed\n");
		exit(1);
	}
	if (h.type != WIRE_WELCOME) {
		printf("%s %s\n", h.type == WIRE_ERROR ? "error" : wire_type_name(h.type), buf);
		exit(1);
	}
	s = strstr(buf, "\"last_seq\":");
	return s ? strtoull(s + 11, NULL, 10) : 0;
}

/* ---- batches ------------------------------------------------------------ */

struct bbuf {
	uint8_t *p;
	size_t len, cap;
};

static void bb_need(struct bbuf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	while (b->len + n > b->cap)
		b->cap = b->cap ? b->cap * 2 : 65536;
	b->p = realloc(b->p, b->cap);
	if (!b->p)
		die("out of memory");
}

static void bb_u32(struct bbuf *b, uint32_t v)
{
	bb_need(b, 4);
	memcpy(b->p + b->len, &v, 4);
	b->len += 4;
}

/* Append one span record (length-prefixed). */
static void add_rec(struct bbuf *b, uint64_t hi, uint64_t lo, uint64_t id, uint64_t parent,
		    uint8_t kind, uint8_t flags, const char *name, const char *svc,
		    const char *ev, uint64_t ev_ns, const char *tk, const char *tv,
		    uint64_t start, uint64_t dur)
{
	uint8_t items[1024];
	size_t off = 0;
	struct spanrec_fixed f = { 0 };
	uint16_t n = 0;

	if (name && !spanrec_put_item(items, sizeof(items), &off, SPAN_ITEM_NAME, 0, name,
				      strlen(name), NULL, 0))
		n++;
	if (svc && !spanrec_put_item(items, sizeof(items), &off, SPAN_ITEM_LOCAL_EP, 8080, svc,
				     strlen(svc), "127.0.0.1", 9))
		n++;
	if (ev && !spanrec_put_item(items, sizeof(items), &off, SPAN_ITEM_EVENT, ev_ns, ev,
				    strlen(ev), NULL, 0))
		n++;
	if (tk && !spanrec_put_item(items, sizeof(items), &off, SPAN_ITEM_TAG, 0, tk, strlen(tk),
				    tv, strlen(tv)))
		n++;
	f.trace_hi = hi;
	f.trace_lo = lo;
	f.span_id = id;
	f.parent_id = parent;
	f.start_ns = start;
	f.duration_ns = dur;
	f.items_len = (uint32_t)off;
	f.nitems = n;
	f.kind = kind;
	f.flags = flags | SPAN_F_SAMPLED;
	bb_u32(b, (uint32_t)(sizeof(f) + off));
	bb_need(b, sizeof(f) + off);
	memcpy(b->p + b->len, &f, sizeof(f));
	memcpy(b->p + b->len + sizeof(f), items, off);
	b->len += sizeof(f) + off;
}

/* splitmix64's finalizer: a bijection, so distinct inputs stay distinct */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ x >> 30) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ x >> 27) * 0x94d049bb133111ebull;
	return x ^ x >> 31;
}

/* Span i of a -k batch of the agent whose id ends in the 16 hex digits
 * salt: trace j = i / K of batch seq, place k = i % K. */
static void add_traced(struct bbuf *b, uint64_t tag, uint64_t salt, uint64_t seq, unsigned i,
		       uint64_t now)
{
	static const char *const verbs[] = { "get", "put", "list", "scan", "lock",
					     "read", "write", "open", "sync", "send" };
	unsigned k = i % per_trace;
	uint64_t t = seq << 20 | i / per_trace, h = mix64(t ^ mix64(tag ^ salt));
	char v[32], svc[96], name[32];

	snprintf(v, sizeof(v), "%u", 200 + (t % 5 == 0) * 300);
	snprintf(svc, sizeof(svc), "%s-%u", service, (unsigned)((t + k) % 20));
	snprintf(name, sizeof(name), "%s-%u", verbs[(t * 7 + k) % 10], (unsigned)((t + k) % 5));
	add_rec(b, tag, h, k + 1, k ? 1 : 0, k ? SPAN_KIND_CLIENT : SPAN_KIND_SERVER, 0, name,
		svc, "queued", now + i * 1000 + 500, "http.status_code", v, now + i * 1000,
		(100 + (h >> 40) % 100000 / (k + 1)) * 1000);
}

static void make_batch(struct bbuf *b, uint64_t tag, uint64_t salt, uint64_t seq, unsigned m)
{
	uint64_t now = span_time_ns();
	char v[32];

	b->len = 0;
	bb_u32(b, m);
	for (unsigned i = 0; i < m; i++) {
		if (per_trace) {
			add_traced(b, tag, salt, seq, i, now);
			continue;
		}
		snprintf(v, sizeof(v), "%u", i);
		add_rec(b, tag, seq, i + 1, i ? 1 : 0, i ? SPAN_KIND_CLIENT : SPAN_KIND_SERVER, 0,
			i % 2 ? "read" : "write", service, "queued", now + 1000,
			"i", v, now + i * 1000, 1000000);
	}
}

static int check_stored(uint64_t tag, uint64_t seq, size_t *n)
{
	static struct store *st;
	static struct store_reader *r;
	struct store_traces t = { 0 };
	char err[256];
	int ret;

	if (!st) {
		st = store__open(dbpath, STORE_F_READONLY, err, sizeof(err));
		if (!st) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
		r = store__reader_new(st);
		if (!r)
			die("reader");
	}
	ret = store__trace(r, tag, seq, &t);
	*n = ret > 0 ? t.v[0].n : 0;
	store_traces_free(&t);
	return ret;
}

struct sender {
	char id[33];
	uint64_t spans_acked;
	int failed;
	pthread_mutex_t *out;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	uint64_t tag = agent_tag(s->id), next = first_seq, end = first_seq + nbatches;
	struct bbuf b = { 0 };
	char buf[4096];
	int fd = connect_to(addr);
	unsigned inflight = 0;

	hello(fd, s->id);
	while (next < end || inflight) {
		struct wire_hdr h;

		while (next < end && inflight < window) {
			make_batch(&b, tag, agent_tag(s->id + 16), next, nspans);
			send_frame(fd, WIRE_BATCH, next, b.p, (uint32_t)b.len);
			if (pace_us)
				usleep(pace_us);
			next++;
			inflight++;
		}
		if (read_frame(fd, &h, buf, sizeof(buf))) {
			pthread_mutex_lock(s->out);
			printf("closed\n");
			fflush(stdout);
			pthread_mutex_unlock(s->out);
			s->failed = 1;
			break;
		}
		inflight--;
		if (h.type == WIRE_ACK) {
			const char *st = strstr(buf, "\"stored\":");

			s->spans_acked += st ? strtoull(st + 9, NULL, 10) : 0;
			if (verify) {
				size_t n;

				if (check_stored(tag, h.seq, &n) < 0 || n != nspans) {
					printf("NOT COMMITTED seq %" PRIu64 ": %zu of %u spans in the store at ACK time\n",
					       h.seq, n, nspans);
					s->failed = 1;
				}
			}
		} else {
			s->failed = 1;
		}
		if (!quiet || h.type != WIRE_ACK) {
			pthread_mutex_lock(s->out);
			printf("%s %" PRIu64 " %s\n", h.type == WIRE_ACK ? "ack" :
			       h.type == WIRE_NACK ? "nack" : "error", h.seq, buf);
			fflush(stdout);
			pthread_mutex_unlock(s->out);
		}
		if (h.type == WIRE_ERROR)
			break;
	}
	free(b.p);
	close(fd);
	return NULL;
}

static int cmd_send(void)
{
	pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
	struct sender *s = calloc(nconns, sizeof(*s));
	pthread_t *t = calloc(nconns, sizeof(*t));
	uint64_t t0 = clock_monotonic_ns(), total = 0;
	int failed = 0;
	double secs;

	for (unsigned i = 0; i < nconns; i++) {
		snprintf(s[i].id, sizeof(s[i].id), "%s", agent_id);
		if (nconns > 1)
			s[i].id[31] = "0123456789abcdef"[i % 16], s[i].id[30] = "0123456789abcdef"[i / 16 % 16];
		s[i].out = &out;
		pthread_create(&t[i], NULL, sender_main, &s[i]);
	}
	for (unsigned i = 0; i < nconns; i++) {
		pthread_join(t[i], NULL);
		total += s[i].spans_acked;
		failed |= s[i].failed;
	}
	secs = (double)(clock_monotonic_ns() - t0) / 1e9;
	printf("rate %.0f spans/s (%" PRIu64 " spans in %.3f s)\n", (double)total / secs, total, secs);
	free(s);
	free(t);
	return failed;
}

static int cmd_dup(void)
{
	struct bbuf b = { 0 };
	char buf[4096];
	struct wire_hdr h;
	int fd = connect_to(addr);

	hello(fd, agent_id);
	make_batch(&b, agent_tag(agent_id), agent_tag(agent_id + 16), first_seq, nspans);
	for (int i = 0; i < 2; i++) {
		send_frame(fd, WIRE_BATCH, first_seq, b.p, (uint32_t)b.len);
		if (read_frame(fd, &h, buf, sizeof(buf)))
			return printf("closed\n"), 1;
		printf("%s %" PRIu64 " %s\n", h.type == WIRE_ACK ? "ack" : wire_type_name(h.type),
		       h.seq, buf);
	}
	free(b.p);
	return 0;
}

/* Send batch seq (b) on fd and print its answer: 0 when ACKed. */
static int send_and_ack(int fd, uint64_t seq, struct bbuf *b)
{
	char buf[4096];
	struct wire_hdr h;

	send_frame(fd, WIRE_BATCH, seq, b->p, (uint32_t)b->len);
	if (read_frame(fd, &h, buf, sizeof(buf)))
		return printf("closed\n"), 1;
	printf("%s %" PRIu64 " %s\n", h.type == WIRE_ACK ? "ack" : wire_type_name(h.type), h.seq, buf);
	return h.type != WIRE_ACK;
}

/* BlkKin partial records of span 0x10 of trace (tag, SEQ): client
 * "frontend", server "backend"; split: the client's in batch SEQ, the
 * server's in SEQ+1. */
static int cmd_partial(int split)
{
	uint64_t tag = agent_tag(agent_id), t = span_time_ns() / 1000 * 1000;
	struct bbuf b = { 0 }, s = { 0 }, *sv = split ? &s : &b;
	int fd = connect_to(addr), ret;
	const uint8_t P = SPAN_F_PARTIAL;

	hello(fd, agent_id);
	bb_u32(&b, split ? 2 : 6);
	if (split)
		bb_u32(&s, 4);
	add_rec(&b, tag, first_seq, 0x10, 0, 0, P, "get", "frontend", "cs", t, NULL, NULL, t, 0);
	add_rec(sv, tag, first_seq, 0x10, 0, 0, P, "get", "backend", "sr", t + 100000, NULL, NULL, t, 0);
	add_rec(sv, tag, first_seq, 0x10, 0, 0, P, "get", "backend", "cache miss", t + 150000, NULL, NULL, t, 0);
	add_rec(sv, tag, first_seq, 0x10, 0, 0, P, "get", "backend", NULL, 0, "rows", "42", t, 0);
	add_rec(sv, tag, first_seq, 0x10, 0, 0, P, "get", "backend", "ss", t + 400000, NULL, NULL, t, 0);
	add_rec(&b, tag, first_seq, 0x10, 0, 0, P, "get", "frontend", "cr", t + 500000, NULL, NULL, t, 0);
	ret = send_and_ack(fd, first_seq, &b);
	if (!ret && split)
		ret = send_and_ack(fd, first_seq + 1, &s);
	free(b.p);
	free(s.p);
	return ret;
}

/* Durations at the edges of the rule (common/zipkin_v1.h); t is the start
 * of a microsecond. */
static int cmd_partial_instant(void)
{
	static const struct {
		uint64_t id;
		const char *svc, *ev;
		uint64_t at;		/* ns after t */
	} p[] = {
		{ 0x20, "frontend", "cs", 0 },	  { 0x20, "backend", "sr", 100000 },
		{ 0x20, "backend", "ss", 100000 }, { 0x20, "frontend", "cr", 500000 },
		{ 0x21, "backend", "sr", 1000200 }, { 0x21, "backend", "ss", 1000600 },
		{ 0x22, "frontend", "cs", 2000000 }, { 0x22, "frontend", "cr", 2000000 },
		{ 0x23, "frontend", "cs", 3001000 }, { 0x23, "frontend", "cr", 3000000 },
		{ 0x24, "backend", "sr", 4000000 }, { 0x24, "backend", "ss", 4002500 },
	};
	uint64_t tag = agent_tag(agent_id), t = span_time_ns() / 1000 * 1000;
	struct bbuf b = { 0 };
	int fd = connect_to(addr), ret;

	hello(fd, agent_id);
	bb_u32(&b, sizeof(p) / sizeof(p[0]));
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		add_rec(&b, tag, first_seq, p[i].id, 0, 0, SPAN_F_PARTIAL, "get", p[i].svc, p[i].ev,
			t + p[i].at, NULL, NULL, t, 0);
	ret = send_and_ack(fd, first_seq, &b);
	free(b.p);
	return ret;
}

static int cmd_badspan(void)
{
	uint64_t tag = agent_tag(agent_id), now = span_time_ns();
	struct bbuf b = { 0 };
	char buf[4096];
	struct wire_hdr h;
	int fd = connect_to(addr);
	size_t at;

	hello(fd, agent_id);
	bb_u32(&b, 3);
	add_rec(&b, tag, first_seq, 1, 0, 0, 0, "good", service, NULL, 0, NULL, NULL, now, 1000);
	at = b.len;
	add_rec(&b, tag, first_seq, 2, 1, 0, 0, "bad", service, NULL, 0, NULL, NULL, now, 1000);
	/* break the second record: its span id (bytes 16..23) becomes 0 */
	memset(b.p + at + 4 + 16, 0, 8);
	add_rec(&b, tag, first_seq, 3, 1, 0, 0, "good", service, NULL, 0, NULL, NULL, now, 1000);
	send_frame(fd, WIRE_BATCH, first_seq, b.p, (uint32_t)b.len);
	if (read_frame(fd, &h, buf, sizeof(buf)))
		return printf("closed\n"), 1;
	printf("%s %" PRIu64 " %s\n", h.type == WIRE_ACK ? "ack" : wire_type_name(h.type), h.seq, buf);
	free(b.p);
	return 0;
}

static int cmd_corrupt(const char *kind)
{
	struct bbuf b = { 0 };
	struct wire_hdr h;
	int fd = connect_to(addr);

	if (strcmp(kind, "batch-first"))
		hello(fd, agent_id);
	make_batch(&b, agent_tag(agent_id), agent_tag(agent_id + 16), first_seq, 2);
	wire_hdr_init(&h, WIRE_BATCH, first_seq, b.p, (uint32_t)b.len);
	if (!strcmp(kind, "corrupt-crc"))
		h.crc ^= 1;
	else if (!strcmp(kind, "corrupt-magic"))
		h.magic = 0x12345678;
	else if (!strcmp(kind, "corrupt-len"))
		h.len = FAY_WIRE_MAX_PAYLOAD + 1;
	if (!strcmp(kind, "corrupt-batch")) {
		/* a well-formed frame whose span length runs past the payload */
		uint32_t big = 1u << 20;

		memcpy(b.p + 4, &big, 4);
		wire_hdr_init(&h, WIRE_BATCH, first_seq, b.p, (uint32_t)b.len);
	}
	write_all(fd, &h, sizeof(h));
	if (strcmp(kind, "corrupt-len") && strcmp(kind, "corrupt-magic"))
		write_all(fd, b.p, b.len);
	free(b.p);
	return expect_error_close(fd);
}

static int cmd_stats(void)
{
	const char *js = "{\"rings\":3,\"lost\":0,\"processes\":2}";
	int fd = connect_to(addr);

	hello(fd, agent_id);
	send_frame(fd, WIRE_STATS, 0, js, (uint32_t)strlen(js));
	close(fd);
	fd = connect_to(addr);
	printf("welcome last_seq=%" PRIu64 "\n", hello(fd, agent_id));
	close(fd);
	return 0;
}

static int cmd_check(void)
{
	uint64_t tag = agent_tag(agent_id);

	for (uint64_t s = first_seq; s < first_seq + nbatches; s++) {
		size_t n;

		if (check_stored(tag, s, &n) < 0)
			die("store read failed");
		printf("%" PRIu64 " %zu\n", s, n);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *tls_ca = NULL, *tls_cert = NULL, *tls_key = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "a:i:t:s:n:m:k:c:W:P:d:S:H:T:C:E:Y:wq")) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'i':
			if (strlen(optarg) != 32)
				die("-i: 32 hex digits");
			snprintf(agent_id, sizeof(agent_id), "%s", optarg);
			break;
		case 't': token = optarg; break;
		case 's': first_seq = strtoull(optarg, NULL, 10); break;
		case 'n': nbatches = (unsigned)atoi(optarg); break;
		case 'm': nspans = (unsigned)atoi(optarg); break;
		case 'k': per_trace = (unsigned)atoi(optarg); break;
		case 'c': nconns = (unsigned)atoi(optarg); break;
		case 'W': window = (unsigned)atoi(optarg); break;
		case 'P': pace_us = (unsigned)atoi(optarg); break;
		case 'd': dbpath = optarg; break;
		case 'S': service = optarg; break;
		case 'H': hostname = optarg; break;
		case 'T': fixed_ns = strtoull(optarg, NULL, 10); break;
		case 'w': verify = 1; break;
		case 'q': quiet = 1; break;
		case 'C': tls_ca = optarg; break;
		case 'E': tls_cert = optarg; break;
		case 'Y': tls_key = optarg; break;
		default: return 2;
		}
	}
	if (verify && per_trace)
		die("-w checks each batch's trace (tag, SEQ): not with -k");
	if (tls_ca) {
		char err[512];

		tls = tls_client_conf(tls_ca, tls_cert, tls_key, err, sizeof(err));
		if (!tls)
			die(err);
	}
	if (optind >= argc)
		die("no command (hello, send, dup, partial, partial-split, partial-instant, badspan, stats, corrupt-*, check)");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[optind], "hello")) {
		int fd = connect_to(addr);

		printf("welcome last_seq=%" PRIu64 "\n", hello(fd, agent_id));
		return 0;
	}
	if (!strcmp(argv[optind], "send"))
		return cmd_send();
	if (!strcmp(argv[optind], "dup"))
		return cmd_dup();
	if (!strcmp(argv[optind], "partial"))
		return cmd_partial(0);
	if (!strcmp(argv[optind], "partial-split"))
		return cmd_partial(1);
	if (!strcmp(argv[optind], "partial-instant"))
		return cmd_partial_instant();
	if (!strcmp(argv[optind], "badspan"))
		return cmd_badspan();
	if (!strcmp(argv[optind], "stats"))
		return cmd_stats();
	if (!strcmp(argv[optind], "check"))
		return cmd_check();
	if (!strncmp(argv[optind], "corrupt-", 8) || !strcmp(argv[optind], "batch-first"))
		return cmd_corrupt(argv[optind]);
	die("unknown command");
	return 2;
}
