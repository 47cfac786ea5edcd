// SPDX-License-Identifier: MIT
/*
 * cluster_scale: a real `fay collector` under N agents' query connections.
 *
 * The agents are simulated, and speak the real protocol over real TCP
 * sockets: HELLO role "query", WELCOME, BEAT every second, QUERY planned
 * with fay's own planner (query_opts.cluster), QSTATUS attached, and at
 * every wall-clock window end one PARTIAL with real partial states
 * (partial_shape_encode + partial_row_encode: G groups of a count, each 1,
 * so every merged group must be N exactly).  What they do not do is load
 * BPF: this measures the collector, its merge and the fan-in.
 *
 *   cluster_scale --fay build/fay [--agents 1024] [--groups 100] [--windows 10]
 *                 [--tree K] [--real R]
 *
 * --tree K: K intermediate collectors (fay collector --parent) between
 * the agents (spread over them) and the root the client asks.
 *
 * --real R: R of the agents are real `fay agent` processes (root: they
 * load and attach the query's BPF programs), the rest simulated.  The
 * query is then a uprobe on cscale_work() of this binary, which a workload
 * process calls BURST times in the middle of every wall-clock second, so
 * every window's merged answer is known exactly: each group == the
 * simulated agents, plus R x BURST in the workload's group (every real
 * agent sees the same process).  (Not a syscall tracepoint: the kernel
 * takes at most 64 BPF programs on one tracepoint, a limit a real fleet,
 * one agent per kernel, never meets.)
 *
 * Prints, for the windows after the first: the delay from a window's end
 * to its merged line at the client (median, p99, max), the collector's
 * CPU (% of one core over the run) and RSS, bytes per host per window
 * (the PARTIAL frame), and whether every merged count was exact.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "common/procstat.h"
#include "common/wire.h"
#include "common/wire_cluster.h"
#include "query/partial.h"

struct sim {
	int fd;
	char host[32];
	uint32_t qid;
	bool running;
};

static int port_free(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;

	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &l);
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

static int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int hello(struct sim *s, int port, int i)
{
	struct wire_hello m = { .role = "query", .btf = -1 };
	struct wire_buf b = { 0 };
	struct wire_hdr h;
	unsigned char *buf = NULL;
	size_t cap = 0;
	char why[256];
	int err;

	s->fd = dial(port);
	if (s->fd < 0)
		return -1;
	snprintf(s->host, sizeof(s->host), "sim-%04d", i);
	snprintf(m.agent_id, sizeof(m.agent_id), "%032x", i + 1);
	snprintf(m.host, sizeof(m.host), "%s", s->host);
	snprintf(m.version, sizeof(m.version), "bench");
	err = wire_put_hello(&b, &m);
	err = err ? : wire_buf_send(&b, s->fd);
	wire_buf_free(&b);
	err = err ? : wire_recv_frame(s->fd, &h, &buf, &cap, 10000, why, sizeof(why));
	free(buf);
	return err || h.type != WIRE_WELCOME ? -1 : 0;
}

static uint64_t cpu_ticks(pid_t pid)
{
	unsigned long long t;

	return proc_cpu_ticks(pid, &t) ? 0 : t;
}

static long proc_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

#define BURST 50

/* What the real agents probe (a uprobe on it); noinline and global so
 * that it is a symbol of its own. */
__attribute__((noinline)) void cscale_work(void);
__attribute__((noinline)) void cscale_work(void)
{
	__asm__ volatile("" ::: "memory");
}

/* The real agents' workload: BURST calls at +500 ms of every wall-clock
 * second, so that no window edge comes near them. */
static pid_t workload(void)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	prctl(PR_SET_NAME, "fay-cscale-wl");
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	for (;;) {
		uint64_t now = clock_realtime_ns(), at = now / 1000000000ull * 1000000000ull + 500000000ull;

		if (at <= now)
			at += 1000000000ull;
		usleep((useconds_t)((at - now) / 1000));
		for (int i = 0; i < BURST; i++)
			cscale_work();
	}
}

/* Start real agent i connected to 127.0.0.1:port, in its own directory. */
static pid_t real_agent(const char *fay, const char *dir, int i, int port)
{
	char d[256], col[64], host[32];
	pid_t pid;

	snprintf(d, sizeof(d), "%s/a%03d", dir, i);
	snprintf(col, sizeof(col), "127.0.0.1:%d", port);
	snprintf(host, sizeof(host), "real-%03d", i);
	mkdir(d, 0700);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		/* never outlive the benchmark, however it ends */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		dup2(null, 1);
		dup2(null, 2);
		execl(fay, fay, "agent", "--collector", col, "--host", host, "--state-dir", d,
		      "--shm-dir", d, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* How many of the peers of the collector at http port hport are hosts
 * named real-NNN (its /api/cluster/peers). */
static int real_peers(int hport)
{
	char cmd[160], buf[65536];
	size_t n;
	int c = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "curl -s http://127.0.0.1:%d/api/cluster/peers", hport);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	pclose(f);
	buf[n] = 0;
	for (char *p = buf; (p = strstr(p, "\"host\":\"real-")); p++)
		c++;
	return c;
}

int main(int argc, char **argv)
{
	const char *fay = "build/fay";
	int nagents = 1024, groups = 100, nwin = 10, tree = 0, nreal = 0, nsim;
	int cports[16], chports[16];
	pid_t *reals = NULL, wl = 0;
	uint64_t rcpu0 = 0;
	long real_rss = 0;
	pid_t kids[16];
	uint64_t kcpu0 = 0;
	struct rlimit rl;
	char dir[] = "/tmp/fay-cscale.XXXXXX", db[128], lst[64], http[64], qtext[1024];
	int wport = port_free(), hport = port_free();
	pid_t coll;
	struct sim *sims;
	struct query *q = NULL;
	const struct plan *p = NULL;
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	FILE *client;
	char cmd[2048], *line = NULL;
	size_t lcap = 0, frame_bytes = 0;
	double *delays;
	unsigned nd = 0, exact = 0, windows_seen = 0;
	uint64_t cpu0 = 0, t0 = 0, next_win, next_beat = 0, wns = 1000000000ull;
	long rss_max = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fay") && i + 1 < argc)
			fay = argv[++i];
		else if (!strcmp(argv[i], "--agents") && i + 1 < argc)
			nagents = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--groups") && i + 1 < argc)
			groups = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--windows") && i + 1 < argc)
			nwin = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--tree") && i + 1 < argc)
			tree = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--real") && i + 1 < argc)
			nreal = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: cluster_scale [--fay PATH] [--agents N] [--groups G] [--windows W] [--tree K] [--real R]\n");
			return 2;
		}
	}
	if (nreal < 0 || nreal > nagents || nreal > 999 || (nreal && geteuid())) {
		fprintf(stderr, "--real: 0 to min(--agents, 999), as root (the agents load BPF)\n");
		return 2;
	}
	nsim = nagents - nreal;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 1;
	snprintf(db, sizeof(db), "%s/c.db", dir);
	snprintf(lst, sizeof(lst), "127.0.0.1:%d", wport);
	snprintf(http, sizeof(http), "127.0.0.1:%d", hport);
	coll = fork();
	if (coll == 0) {
		int null = open("/dev/null", O_WRONLY);

		/* never outlive the benchmark, however it ends */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		dup2(null, 1);
		dup2(null, 2);
		execl(fay, fay, "collector", "--listen", lst, "--http", http, "--db", db,
		      "--max-conns-per-peer", "0", (char *)NULL);
		_exit(127);
	}
	for (int t = 0; t < 100 && dial(hport) < 0; t++)
		usleep(50000);
	if (tree < 0 || tree > 16)
		tree = 16;
	for (int k = 0; k < tree; k++) {
		char kl[64], kh[64], kd[160], parent[64], name[16];
		int khp = chports[k] = port_free();

		cports[k] = port_free();
		snprintf(kl, sizeof(kl), "127.0.0.1:%d", cports[k]);
		snprintf(kh, sizeof(kh), "127.0.0.1:%d", khp);
		snprintf(kd, sizeof(kd), "%s/c%d.db", dir, k);
		snprintf(parent, sizeof(parent), "127.0.0.1:%d", wport);
		snprintf(name, sizeof(name), "mid%d", k);
		kids[k] = fork();
		if (kids[k] == 0) {
			int null = open("/dev/null", O_WRONLY);

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			dup2(null, 1);
			dup2(null, 2);
			execl(fay, fay, "collector", "--listen", kl, "--http", kh, "--db", kd,
			      "--max-conns-per-peer", "0",
			      "--parent", parent, "--host", name, (char *)NULL);
			_exit(127);
		}
		for (int t = 0; t < 100 && dial(khp) < 0; t++)
			usleep(50000);
	}
	if (tree)
		sleep(2);	/* the children's links to the root */
	if (nreal) {
		int have = 0;

		reals = calloc((size_t)nreal, sizeof(*reals));
		for (int i = 0; i < nreal; i++)
			reals[i] = real_agent(fay, dir, i, tree ? cports[i % tree] : wport);
		for (int t = 0; t < 600 && have < nreal; t++) {
			usleep(100000);
			have = 0;
			for (int k = 0; k < (tree ? tree : 1); k++)
				have += real_peers(tree ? chports[k] : hport);
		}
		if (have < nreal) {
			fprintf(stderr, "only %d of %d real agents connected\n", have, nreal);
			return 1;
		}
		fprintf(stderr, "%d real agents connected\n", nreal);
		wl = workload();
	}
	sims = calloc((size_t)nsim + 1, sizeof(*sims));
	for (int i = 0; i < nsim; i++)
		if (hello(&sims[i], tree ? cports[i % tree] : wport, i)) {
			fprintf(stderr, "agent %d: cannot connect (%s)\n", i, strerror(errno));
			return 1;
		}
	fprintf(stderr, "%d simulated agents connected\n", nsim);

	if (nreal) {
		char self[400];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		self[n > 0 ? n : 0] = '\0';
		snprintf(qtext, sizeof(qtext),
			 "from s in cluster.function(\"%s:cscale_work\") group s by s.pid %% %d into g select { k: g.key, n: g.count() } window 1s for %ds",
			 self, groups, nwin + 2);
	} else {
		snprintf(qtext, sizeof(qtext),
			 "from s in cluster.syscall(\"getppid\") group s by s.pid %% %d into g select { k: g.key, n: g.count() } window 1s for %ds",
			 groups, nwin + 2);
	}
	q = query_new("<bench>", qtext, strlen(qtext), &qo);
	if (!q || query_plan(q, &p)) {
		fprintf(stderr, "plan: %s\n", q ? query_error(q) : "oom");
		return 1;
	}
	{
		json_t *b = json_pack("{s:s}", "query", qtext);
		char *bs = json_dumps(b, JSON_COMPACT);

		snprintf(cmd, sizeof(cmd), "curl -sN -H 'Content-Type: application/json' -d '%s' http://%s/api/query",
			 bs, http);
		free(bs);
		json_decref(b);
	}
	client = popen(cmd, "r");
	fcntl(fileno(client), F_SETFL, O_NONBLOCK);
	delays = calloc((size_t)nwin + 8, sizeof(*delays));
	next_win = (clock_realtime_ns() / wns + 1) * wns;

	for (;;) {
		uint64_t now = clock_realtime_ns();
		struct pollfd *pf = calloc((size_t)nsim + 1, sizeof(*pf));
		int timeout = (int)((next_win > now ? next_win - now : 0) / 1000000);

		if (timeout > 100)
			timeout = 100;
		for (int i = 0; i < nsim; i++) {
			pf[i].fd = sims[i].fd;
			pf[i].events = POLLIN;
		}
		pf[nsim].fd = fileno(client);
		pf[nsim].events = POLLIN;
		poll(pf, (nfds_t)nsim + 1, timeout);
		for (int i = 0; i < nsim; i++) {
			struct wire_hdr h;
			unsigned char *buf = NULL;
			size_t cap = 0;
			char why[256];

			if (!(pf[i].revents & POLLIN))
				continue;
			if (wire_recv_frame(sims[i].fd, &h, &buf, &cap, 1000, why, sizeof(why))) {
				free(buf);
				continue;
			}
			if (h.type == WIRE_QUERY) {
				struct wire_query wq;
				struct wire_qstatus st = { .state = WIRE_QS_ATTACHED, .text = "simulated",
							   .len = 9 };
				struct wbuf w = { 0 };

				if (!wire_query_decode(buf, h.len, &wq, why, sizeof(why))) {
					sims[i].qid = wq.qid;
					sims[i].running = true;
					st.qid = wq.qid;
					wire_qstatus_encode(&st, &w);
					wire_send_frame(sims[i].fd, WIRE_QSTATUS, 0, w.p, (uint32_t)w.len);
					wbuf_free(&w);
					if (!t0) {
						t0 = clock_monotonic_ns();
						cpu0 = cpu_ticks(coll);
						for (int k = 0; k < tree; k++)
							kcpu0 += cpu_ticks(kids[k]);
						for (int k = 0; k < nreal; k++)
							rcpu0 += cpu_ticks(reals[k]);
					}
				}
			} else if (h.type == WIRE_CANCEL) {
				sims[i].running = false;
			}
			free(buf);
		}
		free(pf);
		now = clock_realtime_ns();
		if (now >= next_beat) {
			for (int i = 0; i < nsim; i++)
				wire_send_frame(sims[i].fd, WIRE_BEAT, 0, "", 0);
			next_beat = now + 1000000000ull;
		}
		if (now >= next_win) {
			/* every agent's partial of the window that just ended */
			for (int i = 0; i < nsim; i++) {
				struct wire_phost me = { .state = WIRE_HS_ANSWERED };
				struct wire_partial wp = {
					.qid = sims[i].qid, .flags = WIRE_PF_WINDOW,
					.start_ns = next_win - wns, .end_ns = next_win,
					.ncounters = 3, .nhosts = 1, .hosts = &me,
				};
				struct wbuf w = { 0 };
				unsigned char key[8], val[8];
				uint64_t one = 1;

				if (!sims[i].running)
					continue;
				snprintf(me.name, sizeof(me.name), "%s", sims[i].host);
				wire_partial_encode_head(&wp, &w);
				partial_shape_encode(p, &w);
				wbuf_uvar(&w, (uint64_t)groups);
				for (int g = 0; g < groups; g++) {
					int64_t k = g;

					memcpy(key, &k, 8);
					memcpy(val, &one, 8);
					partial_row_encode(p, key, val, &w);
				}
				frame_bytes = w.len + FAY_WIRE_HDR_SIZE;
				wire_send_frame(sims[i].fd, WIRE_PARTIAL, 0, w.p, (uint32_t)w.len);
				wbuf_free(&w);
			}
			next_win += wns;
			if (proc_rss_kb(coll) > rss_max)
				rss_max = proc_rss_kb(coll);
			for (int k = 0; k < nreal; k++)
				if (proc_rss_kb(reals[k]) > real_rss)
					real_rss = proc_rss_kb(reals[k]);
		}
		while (getline(&line, &lcap, client) > 0) {
			json_t *j = json_loads(line, 0, NULL), *rows;
			const char *type = json_string_value(json_object_get(j, "type"));
			uint64_t end = (uint64_t)json_integer_value(json_object_get(j, "end_ns"));
			size_t r;
			json_t *row;
			bool ok = true;

			if (type && !strcmp(type, "progress") && strstr(line, "\"failed\""))
				fprintf(stderr, "%s", line);
			if (type && !strcmp(type, "window") && end) {
				rows = json_object_get(j, "rows");
				json_array_foreach(rows, r, row) {
					json_int_t k = json_integer_value(json_array_get(row, 0));
					json_int_t want = nsim + (nreal && k == wl % groups ? nreal * BURST : 0);

					if (json_integer_value(json_array_get(row, 1)) != want) {
						if (ok && windows_seen)
							fprintf(stderr, "window %u: group %lld: %lld, expected %lld\n",
								windows_seen, (long long)k,
								(long long)json_integer_value(json_array_get(row, 1)),
								(long long)want);
						ok = false;
					}
				}
				if (windows_seen && json_integer_value(json_object_get(json_object_get(j, "hosts"),
									"answered")) != nagents)
					fprintf(stderr, "window %u: %s", windows_seen, line);
				ok = ok && json_array_size(rows) == (size_t)(nsim ? groups : 1) &&
				     json_integer_value(json_object_get(json_object_get(j, "hosts"),
									 "answered")) == nagents;
				/* the first window is partial (the query started in
				 * it), the last ends at the deadline, not on a second */
				if (windows_seen++ && !json_is_true(json_object_get(j, "final")) &&
				    nd < (unsigned)nwin + 8) {
					delays[nd++] = (double)(clock_realtime_ns() - end) / 1e6;
					exact += ok;
				}
			}
			if (type && (!strcmp(type, "end") || !strcmp(type, "error"))) {
				if (!strcmp(type, "error"))
					fprintf(stderr, "query error: %s", line);
				json_decref(j);
				goto done;
			}
			json_decref(j);
		}
		clearerr(client);
	}
done:
	{
		uint64_t dt = clock_monotonic_ns() - t0, cpu = cpu_ticks(coll) - cpu0;
		double cpu_pct = 100.0 * ((double)cpu / (double)sysconf(_SC_CLK_TCK)) / ((double)dt / 1e9);
		double med, p99, mx;

		if (!nd) {
			fprintf(stderr, "no window arrived\n");
			return 1;
		}
		qsort(delays, nd, sizeof(*delays), bench_cmp_double);
		mx = delays[nd - 1];
		p99 = delays[(nd * 99) / 100 < nd ? (nd * 99) / 100 : nd - 1];
		med = median(delays, nd);
		printf("cluster_scale: %d agents (%d real fay agent processes, %d simulated), %d groups, %u windows measured, %s\n",
		       nagents, nreal, nsim, groups, nd, tree ? "a two-level tree" : "flat");
		if (nreal) {
			uint64_t rc = 0;

			for (int k = 0; k < nreal; k++)
				rc += cpu_ticks(reals[k]);
			rc -= rcpu0;
			printf("  real agents: %.2f%% of one core each on average; RSS max %ld KiB\n",
			       100.0 * ((double)rc / (double)sysconf(_SC_CLK_TCK)) / ((double)dt / 1e9) / nreal,
			       real_rss);
		}
		if (tree) {
			uint64_t kc = 0;

			for (int k = 0; k < tree; k++)
				kc += cpu_ticks(kids[k]);
			kc -= kcpu0;
			printf("  %d intermediate collectors: %.1f%% of one core together\n", tree,
			       100.0 * ((double)kc / (double)sysconf(_SC_CLK_TCK)) / ((double)dt / 1e9));
		}
		printf("  window end -> merged line at the client: median %.1f ms, p99 %.1f ms, max %.1f ms (goal <= 200 ms)\n",
		       med, p99, mx);
		printf("  collector CPU: %.1f%% of one core over %.1f s (goal <= 10%%); RSS max %ld KiB\n",
		       cpu_pct, (double)dt / 1e9, rss_max);
		printf("  bytes per host per window: %zu (PARTIAL frame, %d-group count; goal <= 2048)\n",
		       frame_bytes, groups);
		printf("  merged counts exact: %u of %u windows (every group == %d%s, answered == %d)\n",
		       exact, nd, nsim, nreal ? " plus real agents x workload calls in its group" : "",
		       nagents);
	}
	pclose(client);
	for (int k = 0; k < nreal; k++)
		kill(reals[k], SIGTERM);
	for (int k = 0; k < nreal; k++)
		waitpid(reals[k], NULL, 0);
	if (wl) {
		kill(wl, SIGTERM);
		waitpid(wl, NULL, 0);
	}
	for (int k = 0; k < tree; k++) {
		kill(kids[k], SIGTERM);
		waitpid(kids[k], NULL, 0);
	}
	kill(coll, SIGTERM);
	waitpid(coll, NULL, 0);
	for (int i = 0; i < nsim; i++)
		close(sims[i].fd);
	query_free(q);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {
	}
	return 0;
}
