// SPDX-License-Identifier: MIT
/*
 * `fay traces` as a command, against a small HTTP server on loopback that
 * plays the collector: the query the CLI sends (parameters, escaping),
 * what it prints, and its exit status for each kind of failure
 * (unreachable 1, unknown trace 1, refused query 2, bad arguments 2).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "test.h"

static const char trace_json[] =
"[{\"traceId\":\"4bf92f3577b34da6\",\"id\":\"00000000000000a1\",\"name\":\"write\","
"\"timestamp\":1700000000000000,\"duration\":1000,\"localEndpoint\":{\"serviceName\":\"vm-client\"}},"
" {\"traceId\":\"4bf92f3577b34da6\",\"id\":\"00000000000000b1\",\"parentId\":\"00000000000000a1\","
"\"name\":\"object\",\"timestamp\":1700000000000100,\"duration\":400,"
"\"localEndpoint\":{\"serviceName\":\"composer\"},"
"\"annotations\":[{\"timestamp\":1700000000000200,\"value\":\"queue\"}]}]";

static int lfd, port;
static char last_request[2048];

/* Answer requests until the listening socket is shut down. */
static void *server(void *arg)
{
	for (;;) {
		char req[2048], head[256], body[4096];
		const char *status = "200 OK";
		int fd = accept(lfd, NULL, NULL);
		ssize_t n;

		if (fd < 0)
			return NULL;
		n = read(fd, req, sizeof(req) - 1);
		req[n > 0 ? n : 0] = '\0';
		req[strcspn(req, "\r\n")] = '\0';
		snprintf(last_request, sizeof(last_request), "%s", req);
		if (strstr(req, "maxDuration="))
			status = "400 Bad Request",
			snprintf(body, sizeof(body), "maxDuration: must be at least minDuration");
		else if (strstr(req, "GET /api/v2/traces?"))
			snprintf(body, sizeof(body), "[%s]", trace_json);
		else if (strstr(req, "GET /api/v2/trace/4bf92f3577b34da6 "))
			snprintf(body, sizeof(body), "%s", trace_json);
		else if (strstr(req, "GET /api/v2/trace/00000000000000ff "))
			status = "404 Not Found", snprintf(body, sizeof(body), "trace not found");
		else if (strstr(req, "GET /api/v2/trace/00000000000000ee "))
			snprintf(body, sizeof(body), "[{\"traceId\": oops");
		else
			status = "404 Not Found", snprintf(body, sizeof(body), "no such route");
		snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, strlen(body));
		if (write(fd, head, strlen(head)) < 0 || write(fd, body, strlen(body)) < 0)
			diag("server: write: %s", strerror(errno));
		close(fd);
	}
	return arg;
}

/* Run `fay traces ARGS...` with stdout and stderr captured into @out. */
static int run(char *out, size_t outlen, const char *first, ...)
{
	char *argv[16], tmpl[] = "/tmp/fay-test-traces.XXXXXX";
	int argc = 0, fd = mkstemp(tmpl), so = dup(1), se = dup(2), rc;
	va_list ap;
	ssize_t n;

	argv[argc++] = "traces";
	argv[argc++] = (char *)first;
	va_start(ap, first);
	while (argc < 15 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	fflush(stdout);
	dup2(fd, 1);
	dup2(fd, 2);
	rc = cmd_traces(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	n = pread(fd, out, outlen - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(tmpl);
	return rc;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	char url[64], dead[64], out[16384];
	pthread_t th;
	int rc;

	setenv("TZ", "UTC", 1);
	unsetenv("FAY_SERVER");
	setenv("NO_COLOR", "1", 1);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al))
		skip_all("no loopback socket: %s", strerror(errno));
	port = ntohs(a.sin_port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	pthread_create(&th, NULL, server, NULL);

	rc = run(out, sizeof(out), "ls", "--server", url, "--service", "vm client",
		 "--span", "write", "--min-duration", "5ms", "--lookback", "10m",
		 "--limit", "3", NULL);
	is_int(rc, 0, "ls: exit 0");
	is_str(last_request,
	       "GET /api/v2/traces?serviceName=vm%20client&spanName=write&minDuration=5000"
	       "&lookback=600000&limit=3 HTTP/1.1",
	       "ls: Zipkin query, durations in us, lookback in ms, values escaped");
	ok(strstr(out, "4bf92f3577b34da6  vm-client write      2  vm-client,composer") != NULL,
	   "ls: one line per trace");

	rc = run(out, sizeof(out), "ls", "--server", url, "--json", NULL);
	is_int(rc, 0, "ls --json: exit 0");
	ok(strstr(out, "\"spanCount\": 2") && strstr(out, "\"rootService\": \"vm-client\""),
	   "ls --json: summaries");
	ok(strstr(last_request, "limit=10 "), "ls: limit 10 by default");

	setenv("FAY_SERVER", url, 1);
	rc = run(out, sizeof(out), "show", "4BF92F3577B34DA6", "--width", "20", "--ascii", NULL);
	unsetenv("FAY_SERVER");
	is_int(rc, 0, "show: exit 0 (FAY_SERVER, id lower-cased)");
	ok(strstr(out, "vm-client write   |####################|   1.000ms") != NULL,
	   "show: the waterfall");
	ok(strstr(out, "@ +100us queue") != NULL, "show: annotations listed");

	rc = run(out, sizeof(out), "show", "4bf92f3577b34da6", "--server", url, "--json", NULL);
	ok(rc == 0 && strstr(out, "\"traceId\": \"4bf92f3577b34da6\""), "show --json: the spans");

	rc = run(out, sizeof(out), "show", "00000000000000ff", "--server", url, NULL);
	is_int(rc, 1, "show: unknown trace id: exit 1");
	ok(strstr(out, "error: no trace 00000000000000ff on http://127.0.0.1:") != NULL,
	   "show: unknown trace id named");

	rc = run(out, sizeof(out), "show", "00000000000000ee", "--server", url, NULL);
	is_int(rc, 1, "show: broken JSON from the server: exit 1");
	ok(strstr(out, "the answer is not JSON: line 1") != NULL, "show: broken JSON named");

	/* The collector refuses the query: its reason, as a bad argument. */
	rc = run(out, sizeof(out), "ls", "--server", url, "--max-duration", "1s", NULL);
	is_int(rc, 2, "ls: query refused by the collector (400): exit 2");
	ok(strstr(out, "answered HTTP 400 for /api/v2/traces?maxDuration=1000000&limit=10: "
		       "maxDuration: must be at least minDuration") != NULL,
	   "ls: the collector's reason shown");

	rc = run(out, sizeof(out), "show", "zz", "--server", url, NULL);
	is_int(rc, 2, "show: malformed id: exit 2");
	ok(strstr(out, "must be 16 or 32 hex digits") != NULL, "show: malformed id named");

	shutdown(lfd, SHUT_RDWR);
	pthread_join(th, NULL);
	close(lfd);

	snprintf(dead, sizeof(dead), "http://127.0.0.1:%d", port);
	rc = run(out, sizeof(out), "ls", "--server", dead, NULL);
	is_int(rc, 1, "collector down: exit 1");
	ok(strstr(out, "cannot reach the fay collector at") && strstr(out, dead) &&
	   strstr(out, "fay collector"), "collector down: names the URL and `fay collector`");

	is_int(run(out, sizeof(out), "ls", "--limit", "0", NULL), 2, "ls --limit 0: exit 2");
	is_int(run(out, sizeof(out), "ls", "--min-duration", "soon", NULL), 2,
	       "ls --min-duration soon: exit 2");
	ok(strstr(out, "--min-duration 'soon': not a duration") != NULL, "  and says why");
	is_int(run(out, sizeof(out), "ls", "extra", NULL), 2, "ls with an argument: exit 2");
	is_int(run(out, sizeof(out), "show", NULL), 2, "show without an id: exit 2");
	is_int(run(out, sizeof(out), "frob", NULL), 2, "unknown subcommand: exit 2");
	is_int(run(out, sizeof(out), "ls", "--color", "pink", NULL), 2, "bad --color: exit 2");
	is_int(run(out, sizeof(out), "--help", NULL), 0, "--help: exit 0");
	ok(strstr(out, "NAME") && strstr(out, "SYNOPSIS") && strstr(out, "EXIT STATUS") &&
	   strstr(out, "ENVIRONMENT"), "traces --help: a manual page");
	is_int(run(out, sizeof(out), "ls", "--help", NULL), 0, "ls --help: exit 0");
	ok(strstr(out, "fay traces ls - list") && strstr(out, "EXAMPLES"), "ls --help: its page");
	is_int(run(out, sizeof(out), "show", "--help", NULL), 0, "show --help: exit 0");
	ok(strstr(out, "fay traces show - show") && strstr(out, "OPTIONS"), "show --help: its page");
	return test_done();
}
