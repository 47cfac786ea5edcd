// SPDX-License-Identifier: MIT
/*
 * A request that crosses hosts, for the capture rules' test (tests/
 * integration/flight_rule_netns.sh): a client and a chain of servers over
 * TCP, each passing its span's traceparent to the next on one line:
 *
 *     client  (span "request", child "call")  ->
 *     server  (span "hop" from the traceparent, child "call")  -> ...
 *     server without --next  (span "leaf"; sleeps SLOW_MS when asked)
 *
 * With --late-ms MS, a leaf asked to sleep also starts a span "late", a
 * child of the leaf on a thread of its own, that ends MS after the leaf
 * answered (the follow rounds of a capture must bring it).
 *
 * The client prints one line per request once it ended:
 *
 *     TRACE_HEX SLOW SAMPLED
 *
 * (SLOW 1 when its leaf was asked to sleep, SAMPLED 1 when head sampling
 * chose the trace).  A server serves one connection, its lines in order,
 * and exits when it closes (so a chain ends when its client does); a
 * client of a server not listening yet tries again for 30 s.
 *
 *   flight_hop --serve PORT [--next ADDR:PORT] [--service NAME] [--late-ms MS]
 *   flight_hop --client ADDR:PORT [--requests N] [--slow-every K]
 *              [--slow-ms MS] [--pause-us US] [--service NAME]
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fay/trace.h>

static FILE *dial(const char *addr)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
		fprintf(stderr, "bad address %s\n", addr);
		return NULL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	sa.sin_port = htons((unsigned short)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", addr);
		return NULL;
	}
	/* the next hop may not listen yet: try for 30 s */
	for (int i = 0; i < 600; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			break;
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fdopen(fd, "r+");
		close(fd);
		usleep(50000);
	}
	perror(addr);
	return NULL;
}

#define LATE_MAX 64

/* A late span: its parent's traceparent and how long it lasts. */
struct late {
	char tp[FAY_TRACEPARENT_LEN];
	long ms;
	pthread_t t;
};

static void *late_main(void *arg)
{
	struct late *l = arg;
	struct fay_span *s = fay_span_remote(l->tp, "late");

	usleep((useconds_t)l->ms * 1000);
	fay_span_end(s);
	return NULL;
}

/* Send "TRACEPARENT SLOW_MS" to the next hop and wait for its "ok". */
static int call(FILE *next, const struct fay_span *s, long slow_ms)
{
	char tp[FAY_TRACEPARENT_LEN], line[64];

	if (fay_span_traceparent(s, tp, sizeof(tp)) < 0)
		return -1;
	fprintf(next, "%s %ld\n", tp, slow_ms);
	fflush(next);
	return fgets(line, sizeof(line), next) && !strncmp(line, "ok", 2) ? 0 : -1;
}

static int serve(int port, const char *next_addr, long late_ms)
{
	static struct late late[LATE_MAX];
	int nlate = 0;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	FILE *in, *next = NULL;
	char line[256];

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 4)) {
		perror("listen");
		return 1;
	}
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	if (fd < 0 || !(in = fdopen(fd, "r+")))
		return 1;
	if (next_addr && !(next = dial(next_addr)))
		return 1;
	while (fgets(line, sizeof(line), in)) {
		char tp[FAY_TRACEPARENT_LEN];
		long slow_ms = 0;
		struct fay_span *s;

		if (sscanf(line, "%55s %ld", tp, &slow_ms) != 2)
			return 1;
		s = fay_span_remote(tp, next ? "hop" : "leaf");
		if (next) {
			struct fay_span *c = fay_span_child(s, "call");
			int err = call(next, c, slow_ms);

			fay_span_end(c);
			if (err)
				return 1;
		} else if (slow_ms) {
			if (late_ms && nlate < LATE_MAX &&
			    fay_span_traceparent(s, late[nlate].tp, sizeof(late[nlate].tp)) > 0) {
				late[nlate].ms = late_ms;
				if (!pthread_create(&late[nlate].t, NULL, late_main, &late[nlate]))
					nlate++;
			}
			usleep((useconds_t)slow_ms * 1000);
		}
		fay_span_end(s);
		fputs("ok\n", in);
		fflush(in);
	}
	if (next)
		fclose(next);
	fclose(in);
	for (int i = 0; i < nlate; i++)
		pthread_join(late[i].t, NULL);
	return 0;
}

static int client(const char *addr, long requests, long slow_every, long slow_ms, long pause_us)
{
	FILE *next = dial(addr);

	if (!next)
		return 1;
	for (long i = 0; i < requests; i++) {
		char tp[FAY_TRACEPARENT_LEN];
		int slow = slow_every && i % slow_every == slow_every - 1;
		struct fay_span *root = fay_span_root("request"), *c;

		fay_span_tag_int(root, "request", i);
		c = fay_span_child(root, "call");
		if (call(next, c, slow ? slow_ms : 0)) {
			fprintf(stderr, "request %ld: no answer\n", i);
			return 1;
		}
		fay_span_end(c);
		if (fay_span_traceparent(root, tp, sizeof(tp)) < 0)
			return 1;
		fay_span_end(root);
		/* 00-TRACE(32)-SPAN(16)-FLAGS(2) */
		printf("%.32s %d %c\n", tp + 3, slow, tp[54] == '1' ? '1' : '0');
		fflush(stdout);
		if (pause_us)
			usleep((useconds_t)pause_us);
	}
	fclose(next);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "serve", required_argument, NULL, 'S' },
		{ "next", required_argument, NULL, 'x' },
		{ "client", required_argument, NULL, 'c' },
		{ "requests", required_argument, NULL, 'n' },
		{ "slow-every", required_argument, NULL, 'k' },
		{ "slow-ms", required_argument, NULL, 'm' },
		{ "pause-us", required_argument, NULL, 'p' },
		{ "service", required_argument, NULL, 's' },
		{ "late-ms", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	long requests = 30, slow_every = 10, slow_ms = 200, pause_us = 20000, late_ms = 0;
	const char *next = NULL, *to = NULL, *service = "hop";
	int opt, port = 0, err;

	while ((opt = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (opt) {
		case 'S': port = atoi(optarg); break;
		case 'x': next = optarg; break;
		case 'c': to = optarg; break;
		case 'n': requests = atol(optarg); break;
		case 'k': slow_every = atol(optarg); break;
		case 'm': slow_ms = atol(optarg); break;
		case 'p': pause_us = atol(optarg); break;
		case 's': service = optarg; break;
		case 'l': late_ms = atol(optarg); break;
		default:
			fprintf(stderr, "usage: flight_hop --serve PORT [--next ADDR:PORT] | "
				"--client ADDR:PORT [--requests N] [--slow-every K] [--slow-ms MS] "
				"[--pause-us US]  [--service NAME] [--late-ms MS]\n");
			return 2;
		}
	}
	if (!port == !to) {
		fprintf(stderr, "flight_hop: one of --serve PORT and --client ADDR:PORT\n");
		return 2;
	}
	err = fay_init(service, "127.0.0.1", port ? port : 7200);
	if (err) {
		fprintf(stderr, "fay_init: %s\n", strerror(-err));
		return 1;
	}
	return port ? serve(port, next, late_ms) : client(to, requests, slow_every, slow_ms, pause_us);
}
