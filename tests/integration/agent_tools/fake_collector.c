// SPDX-License-Identifier: MIT
/*
 * A minimal collector for the agent tests: speaks the wire protocol
 * (src/common/wire.h), decodes every span of every batch, appends one line
 * per stored span to --out, keeps per-agent last_seq in --state (so it can
 * be restarted without storing a batch twice), and misbehaves on request.
 *
 *   fake_collector --port-file F --out F [--state F] [--stats F]
 *                  [--nack-every N] [--drop-every N] [--ack-delay-ms MS]
 *                  [--garbage-after N]
 *
 * Out line:  <seq> <span id hex> <name> <local service> <local port>
 * --nack-every N     NACK every Nth batch received (not stored), then close
 *                    the connection (as the real collector does)
 * --drop-every N     close the connection on every Nth batch (not stored)
 * --garbage-after N  after N batches, answer with a frame with a bad crc
 * --query TEXT       to a query connection (HELLO role "query"): WELCOME,
 *                    then QUERY TEXT (qid 1) with --query-flags N (WIRE_QF_*,
 *                    default 0: as a collector before #20); every QSTATUS
 *                    the agent answers is printed to stderr:
 *                    "fake_collector: QSTATUS qid state text"
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/bytes.h"
#include "common/spanrec.h"
#include "common/wire.h"
#include "common/wire_cluster.h"

#define MAXC 16
#define MAXAG 16

struct conn {
	int fd;
	struct wire_reader rd;
	char agent[33];
};

static struct {
	char id[33];
	uint64_t last;
} agents[MAXAG];
static int nagents;

static const char *out_path, *state_path, *stats_path;
static long nack_every, drop_every, ack_delay_ms, garbage_after;
static long nbatches;
static const char *query_text;
static unsigned query_flags;
static volatile sig_atomic_t stop;

static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

static uint64_t *last_of(const char *id)
{
	for (int i = 0; i < nagents; i++)
		if (!strcmp(agents[i].id, id))
			return &agents[i].last;
	if (nagents == MAXAG)
		return NULL;
	snprintf(agents[nagents].id, sizeof(agents[nagents].id), "%s", id);
	agents[nagents].last = 0;
	return &agents[nagents++].last;
}

static void save_state(void)
{
	char tmp[4096];
	FILE *f;

	if (!state_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", state_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	for (int i = 0; i < nagents; i++)
		fprintf(f, "%s %" PRIu64 "\n", agents[i].id, agents[i].last);
	fclose(f);
	rename(tmp, state_path);
}

static void load_state(void)
{
	char id[64];
	unsigned long long v;
	FILE *f = state_path ? fopen(state_path, "r") : NULL;

	if (!f)
		return;
	while (fscanf(f, "%63s %llu", id, &v) == 2) {
		uint64_t *l = last_of(id);

		if (l)
			*l = v;
	}
	fclose(f);
}

static int send_frame(int fd, unsigned type, uint64_t seq, const char *json, int corrupt)
{
	struct wire_hdr h;
	uint32_t len = (uint32_t)strlen(json);
	char buf[1024];

	wire_hdr_init(&h, type, seq, json, len);
	if (corrupt)
		h.crc ^= 0xdeadbeef;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), json, len);
	return send(fd, buf, sizeof(h) + len, MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + len) ? 0 : -1;
}

/* Find "key":"value" in a small JSON object (the agent writes compact JSON). */
static void json_str(const char *j, size_t len, const char *key, char *out, size_t olen)
{
	char pat[64];
	const char *p;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = memmem(j, len, pat, strlen(pat));
	if (!p)
		return;
	p += strlen(pat);
	for (size_t i = 0; i + 1 < olen && p < j + len && *p != '"'; i++, p++) {
		out[i] = *p;
		out[i + 1] = '\0';
	}
}

struct store_ctx {
	FILE *f;
	uint64_t seq;
	int bad;
};

static int store_batch(const uint8_t *p, uint32_t len, uint64_t seq, char *err, size_t errlen)
{
	struct wire_batch_rd rd;
	const uint8_t *rec;
	uint32_t sl;
	FILE *f;
	int ret;

	if (wire_batch_open(&rd, p, len, seq, err, errlen))
		return -1;
	f = fopen(out_path, "a");
	if (!f) {
		snprintf(err, errlen, "cannot open out file");
		return -1;
	}
	while ((ret = wire_batch_next(&rd, &rec, &sl, err, errlen)) > 0) {
		struct spanrec r;
		char id[17];

		if (spanrec_decode(rec, sl, &r, err, errlen) < 0) {
			ret = -1;
			break;
		}
		spanrec_id_hex(r.f.span_id, id);
		fprintf(f, "%" PRIu64 " %s %.*s %.*s %u\n", seq, id, (int)r.name.len, r.name.p,
			r.local.present ? (int)r.local.service.len : 1,
			r.local.present ? r.local.service.p : "-",
			r.local.present ? r.local.port : 0);
	}
	fclose(f);
	return ret < 0 ? -1 : 0;
}

/* Handle one frame; returns 0, or -1 to close the connection. */
static int on_frame(struct conn *c, const struct wire_hdr *h, const uint8_t *p)
{
	char err[256], js[256];

	switch (h->type) {
	case WIRE_HELLO: {
		uint64_t *l;

		json_str((const char *)p, h->len, "agent_id", c->agent, sizeof(c->agent));
		l = last_of(c->agent);
		snprintf(js, sizeof(js), "{\"version\":\"fake\",\"last_seq\":%" PRIu64 "}",
			 l ? *l : 0);
		fprintf(stderr, "fake_collector: HELLO from %s, last_seq %" PRIu64 "\n",
			c->agent, l ? *l : 0);
		json_str((const char *)p, h->len, "role", err, sizeof(err));
		if (query_text && !strcmp(err, "query")) {
			struct wire_query q = { .qid = 1, .text = query_text,
						.len = strlen(query_text), .flags = query_flags };
			struct wbuf w = { 0 };
			int ret;

			if (send_frame(c->fd, WIRE_WELCOME, 0, "{\"version\":\"fake\"}", 0))
				return -1;
			wire_query_encode(&q, &w);
			ret = w.err ? -1 : wire_send_frame(c->fd, WIRE_QUERY, 0, w.p, (uint32_t)w.len);
			wbuf_free(&w);
			fprintf(stderr, "fake_collector: QUERY sent (flags %u)\n", query_flags);
			return ret ? -1 : 0;
		}
		return send_frame(c->fd, WIRE_WELCOME, 0, js, 0);
	}
	case WIRE_BEAT:		/* a query connection's heartbeat */
		return 0;
	case WIRE_PARTIAL:
		fprintf(stderr, "fake_collector: PARTIAL\n");
		return 0;
	case WIRE_QSTATUS: {
		struct wire_qstatus st;

		if (wire_qstatus_decode(p, h->len, &st, err, sizeof(err)))
			fprintf(stderr, "fake_collector: QSTATUS unreadable: %s\n", err);
		else
			fprintf(stderr, "fake_collector: QSTATUS %u %d %.*s\n", st.qid, (int)st.state,
				(int)st.len, st.text);
		return 0;
	}
	case WIRE_STATS:
		if (stats_path) {
			FILE *f = fopen(stats_path, "w");

			if (f) {
				fwrite(p, 1, h->len, f);
				fclose(f);
			}
		}
		return 0;
	case WIRE_BATCH: {
		uint64_t *l = last_of(c->agent);

		nbatches++;
		if (garbage_after && nbatches > garbage_after) {
			garbage_after = 0;
			fprintf(stderr, "fake_collector: sending a corrupt frame\n");
			send_frame(c->fd, WIRE_ACK, h->seq, "{}", 1);
			return 0;
		}
		if (drop_every && nbatches % drop_every == 0) {
			fprintf(stderr, "fake_collector: dropping the connection at batch %" PRIu64 "\n",
				h->seq);
			return -1;
		}
		if (nack_every && nbatches % nack_every == 0) {
			/* As the real collector: NACK, then close, so that no
			 * later batch of this connection is stored. */
			fprintf(stderr, "fake_collector: NACK batch %" PRIu64 ", closing\n", h->seq);
			send_frame(c->fd, WIRE_NACK, h->seq, "{\"error\":\"store busy (test)\"}", 0);
			return -1;
		}
		if (ack_delay_ms)
			usleep((useconds_t)ack_delay_ms * 1000);
		if (l && h->seq <= *l) {
			fprintf(stderr, "fake_collector: duplicate batch %" PRIu64 "\n", h->seq);
			return send_frame(c->fd, WIRE_ACK, h->seq,
					  "{\"stored\":0,\"duplicate\":true,\"rejected\":0}", 0);
		}
		if (store_batch(p, h->len, h->seq, err, sizeof(err))) {
			fprintf(stderr, "fake_collector: batch %" PRIu64 ": %s\n", h->seq, err);
			snprintf(js, sizeof(js), "{\"error\":\"batch %" PRIu64 ": bad\"}", h->seq);
			send_frame(c->fd, WIRE_ERROR, 0, js, 0);
			return -1;
		}
		if (l)
			*l = h->seq;
		save_state();
		return send_frame(c->fd, WIRE_ACK, h->seq,
				  "{\"stored\":1,\"duplicate\":false,\"rejected\":0}", 0);
	}
	default:
		send_frame(c->fd, WIRE_ERROR, 0, "{\"error\":\"unexpected frame\"}", 0);
		return -1;
	}
}

static int on_readable(struct conn *c)
{
	struct wire_frame f;
	char err[256];
	int ret;

	while ((ret = wire_read(&c->rd, c->fd, &f, err, sizeof(err))) == 1)
		if (on_frame(c, &f.h, f.payload))
			return -1;
	if (ret == 0)
		return 0;
	if (ret == -EPROTO || ret == -EBADMSG)
		fprintf(stderr, "fake_collector: %s\n", err);
	if (ret == -EBADMSG)
		send_frame(c->fd, WIRE_ERROR, 0, "{\"error\":\"bad crc\"}", 0);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "port-file", required_argument, NULL, 'P' },
		{ "out", required_argument, NULL, 'o' },
		{ "state", required_argument, NULL, 's' },
		{ "stats", required_argument, NULL, 'S' },
		{ "nack-every", required_argument, NULL, 'n' },
		{ "drop-every", required_argument, NULL, 'd' },
		{ "ack-delay-ms", required_argument, NULL, 'a' },
		{ "garbage-after", required_argument, NULL, 'g' },
		{ "query", required_argument, NULL, 'q' },
		{ "query-flags", required_argument, NULL, 'f' },
		{ 0 },
	};
	struct conn cs[MAXC] = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const char *port_file = NULL;
	socklen_t sl = sizeof(sa);
	int c, lfd, one = 1;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'p': sa.sin_port = htons((uint16_t)atoi(optarg)); break;
		case 'P': port_file = optarg; break;
		case 'o': out_path = optarg; break;
		case 's': state_path = optarg; break;
		case 'S': stats_path = optarg; break;
		case 'n': nack_every = atol(optarg); break;
		case 'd': drop_every = atol(optarg); break;
		case 'a': ack_delay_ms = atol(optarg); break;
		case 'g': garbage_after = atol(optarg); break;
		case 'q': query_text = optarg; break;
		case 'f': query_flags = (unsigned)atol(optarg); break;
		default:
			fprintf(stderr, "usage: fake_collector --out F [--port P] [--port-file F] "
				"[--state F] [--stats F] [--nack-every N] [--drop-every N] "
				"[--ack-delay-ms MS] [--garbage-after N]\n");
			return 2;
		}
	}
	if (!out_path) {
		fprintf(stderr, "fake_collector: --out is required\n");
		return 2;
	}
	load_state();
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 8)) {
		perror("fake_collector: listen");
		return 1;
	}
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	if (port_file) {
		char tmp[4096];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		f = fopen(tmp, "w");
		if (!f) {
			perror(port_file);
			return 1;
		}
		fprintf(f, "%u\n", ntohs(sa.sin_port));
		fclose(f);
		rename(tmp, port_file);
	}
	for (int i = 0; i < MAXC; i++) {
		cs[i].fd = -1;
		wire_reader_init(&cs[i].rd, FAY_WIRE_MAX_PAYLOAD);
	}
	while (!stop) {
		struct pollfd pf[MAXC + 1];
		int n;

		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < MAXC; i++)
			pf[i + 1] = (struct pollfd){ .fd = cs[i].fd, .events = POLLIN };
		n = poll(pf, MAXC + 1, 200);
		if (n <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			for (int i = 0; fd >= 0 && i < MAXC; i++) {
				if (cs[i].fd < 0) {
					cs[i].fd = fd;
					wire_reader_reset(&cs[i].rd);
					cs[i].agent[0] = '\0';
					fd = -1;
				}
			}
			if (fd >= 0)
				close(fd);
		}
		for (int i = 0; i < MAXC; i++) {
			if (cs[i].fd < 0 || !(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (on_readable(&cs[i])) {
				close(cs[i].fd);
				cs[i].fd = -1;
			}
		}
	}
	return 0;
}
