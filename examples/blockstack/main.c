// SPDX-License-Identifier: MIT
/*
 * blockstack: the parent.  Starts the five roles as processes of this
 * same program (--role ...), each reporting its port on a pipe once it
 * listens, wires them together, lets the vm-client run its requests, waits
 * for the shutdown that travels down the stack, and prints a summary.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blockstack.h"

static const char help[] =
"NAME\n"
"    blockstack - a traced storage stack: BlkKin's example request path\n"
"\n"
"SYNOPSIS\n"
"    blockstack [--requests N] [--sample N] [--write-ratio F] [--rate R]\n"
"               [--size BYTES] [--dir DIR] [--seed S] [--object-size BYTES]\n"
"               [--volume BYTES] [--quiet]\n"
"\n"
"DESCRIPTION\n"
"    Runs an I/O request's route through a storage stack as five processes\n"
"    on TCP loopback, each traced by libfay under its own service name:\n"
"\n"
"      vm-client -> composer -> mapper -> blocker-1, blocker-2\n"
"\n"
"    The vm-client issues N reads and writes on a virtual volume, one at a\n"
"    time, and checks each read against what it wrote.  The composer splits\n"
"    a request into object pieces.  The mapper places objects: a write goes\n"
"    to both blockers in parallel, a read to one.  A blocker appends a write\n"
"    to its journal, then stores it in the object's file under DIR.\n"
"    Every message carries a W3C traceparent, so each request is one trace:\n"
"      vm-client write|read      (blkin API; cs, cr; offset, size)\n"
"        composer write|read     (libfay API)\n"
"          composer object       per object piece (object, offset, size)\n"
"            mapper map          (blkin API; sr, ss; object, offset, size)\n"
"              mapper replicate|read   per blocker (cs, cr; blocker)\n"
"                blocker-N write|read  (queue, journal, filestore; object,\n"
"                                       offset, size)\n"
"    Start `fay agent` and `fay collector` first to collect the spans (see\n"
"    scripts/demo); without an agent the spans stay in the shm rings.\n"
"    At the end all roles shut down and one line sums up the run: requests,\n"
"    failures, bytes, spans recorded (Zipkin spans: a BlkKin span counts\n"
"    once), wall time.\n"
"\n"
"OPTIONS\n"
"    -n, --requests N       requests to run (default 100)\n"
"    -s, --sample N         record 1 trace in N (sets FAY_SAMPLE=N for every\n"
"                           role; the decision is made at the vm-client and\n"
"                           followed downstream).  Default: FAY_SAMPLE, else 1\n"
"    -w, --write-ratio F    fraction of writes, 0..1 (default 0.7)\n"
"    -r, --rate R           at most R requests per second (default: as fast\n"
"                           as the stack answers)\n"
"    -b, --size BYTES       bytes per request (default 32k; k and m suffixes)\n"
"    -d, --dir DIR          where the blockers keep their files (created; kept\n"
"                           afterwards).  Default: a temporary directory,\n"
"                           removed at the end\n"
"        --seed S           workload seed (default: from the clock; printed)\n"
"        --object-size B    object size (default 16k)\n"
"        --volume B         volume size (default 16m)\n"
"    -q, --quiet            no summary line\n"
"        --hold NAME:K      testing: blocker NAME stops inside its K-th span,\n"
"                           with the span open, and writes its pid to\n"
"                           DIR/NAME.held; the run waits until it is killed\n"
"    -h, --help             this page\n"
"\n"
"EXAMPLES\n"
"    blockstack --requests 50\n"
"    blockstack --requests 1000 --sample 10 --write-ratio 0.5 --size 64k\n"
"\n"
"EXIT STATUS\n"
"    0 every request succeeded and every role exited cleanly; 1 otherwise\n"
"    (the failures are named on stderr); 2 bad arguments.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_SAMPLE, FAY_SHM_DIR, FAY_DISABLE as for any libfay program\n"
"    (include/fay/trace.h).  FAY_SERVICE is ignored: each role names itself.\n"
"    BLOCKSTACK_CPU_US=ROLE=US[,...]  a known CPU cost per layer: each role\n"
"    named (vm-client, composer, mapper, blocker-1, blocker-2) spins US\n"
"    microseconds of its thread's CPU time per request it serves, inside\n"
"    the span it opens for it (for CPU profiles checked against it).\n";

enum { R_B1, R_B2, R_MAPPER, R_COMPOSER, R_CLIENT, R_N };
static const char *const role_names[R_N] = {
	"blocker-1", "blocker-2", "mapper", "composer", "vm-client",
};

struct child {
	pid_t pid;
	int rd;               /* its notify pipe */
	int port;
	int status;           /* from waitpid, valid when reaped */
	int reaped;
	char line[256];       /* partial line read so far */
	size_t ll;
};

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	else if (*end == 'g' || *end == 'G')
		v <<= 30, end++;
	if (*end || !v)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_ports(const char *s, int *p)
{
	return sscanf(s, "%d,%d", &p[0], &p[1]) == 2 ? 0 : -EINVAL;
}

/* Start one role: this program again with --role; its pipe on fd 3. */
static int spawn(struct child *c, const char *self, char **args)
{
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	c->pid = fork();
	if (c->pid < 0) {
		int err = -errno;

		close(pfd[0]);
		close(pfd[1]);
		return err;
	}
	if (!c->pid) {
		if (dup2(pfd[1], 3) < 0)
			_exit(127);
		execv(self, args);
		fprintf(stderr, "blockstack: exec %s: %s\n", self, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	c->rd = pfd[0];
	return 0;
}

/*
 * Read one line from @c's pipe within @ms; returns 1 with the line in
 * c->line, 0 at end of stream, -ETIMEDOUT, or -EINTR on a signal.
 */
static int child_line(struct child *c, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = c->rd, .events = POLLIN };
		char ch;
		ssize_t r;
		int left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 +
				  (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (stop_sig)
			return -EINTR;
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, left) <= 0)
			continue;
		r = read(c->rd, &ch, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		if (ch == '\n') {
			c->line[c->ll] = '\0';
			c->ll = 0;
			return 1;
		}
		if (c->ll < sizeof(c->line) - 1)
			c->line[c->ll++] = ch;
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	return remove(path);
}

/* A number as an argv string, in the next of @slots. */
static char *num_arg(char slots[][64], int *n, unsigned long long v)
{
	char *s = slots[(*n)++];

	snprintf(s, 64, "%llu", v);
	return s;
}

static void stop_children(struct child *c, int sig)
{
	for (int i = 0; i < R_N; i++)
		if (c[i].pid > 0 && !c[i].reaped)
			kill(c[i].pid, sig);
}

/* Reap every child within @ms; returns how many are still running. */
static int reap(struct child *c, int ms)
{
	int running = 0;

	for (int waited = 0;; waited += 20) {
		running = 0;
		for (int i = 0; i < R_N; i++) {
			if (c[i].pid <= 0 || c[i].reaped)
				continue;
			if (waitpid(c[i].pid, &c[i].status, WNOHANG) == c[i].pid)
				c[i].reaped = 1;
			else
				running++;
		}
		if (!running || waited >= ms)
			return running;
		usleep(20000);
	}
}

static int run_parent(const struct bs_opts *o, char *self)
{
	struct child c[R_N];
	char slots[16][64], dir[4096], ports[64];
	int nslot = 0, ret = 1, tmpdir = !o->dir, failed_roles = 0;
	unsigned long long writes = 0, reads = 0, bytes = 0, spans = 0;
	long failed = -1;
	struct timespec t0, t1;
	struct sigaction sa = { .sa_handler = on_signal };

	memset(c, 0, sizeof(c));
	for (int i = 0; i < R_N; i++)
		c[i].rd = -1;
	if (tmpdir) {
		const char *t = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/blockstack.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(dir)) {
			fprintf(stderr, "blockstack: cannot make a temporary directory %s: %s\n",
				dir, strerror(errno));
			return 1;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", o->dir);
		if (mkdir(dir, 0700) && errno != EEXIST) {
			fprintf(stderr, "blockstack: --dir %s: %s\n", dir, strerror(errno));
			return 1;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	unsetenv("FAY_SERVICE");
	if (o->sample_set) {
		char n[16];

		snprintf(n, sizeof(n), "%u", o->sample);
		setenv("FAY_SAMPLE", n, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);

	for (int i = 0; i < R_N; i++) {
		char *args[32];
		int a = 0, err;

		nslot = 0;      /* spawn() has exec'd the previous role's argv */

		args[a++] = self;
		args[a++] = "--role";
		args[a++] = i <= R_B2 ? "blocker" : (char *)role_names[i];
		args[a++] = "--name";
		args[a++] = (char *)role_names[i];
		args[a++] = "--notify-fd";
		args[a++] = "3";
		args[a++] = "--dir";
		args[a++] = dir;
		args[a++] = "--size";
		args[a++] = num_arg(slots, &nslot, o->size);
		args[a++] = "--object-size";
		args[a++] = num_arg(slots, &nslot, o->object_size);
		if (i == R_MAPPER) {
			snprintf(ports, sizeof(ports), "%d,%d", c[R_B1].port, c[R_B2].port);
			args[a++] = "--blocker-ports";
			args[a++] = ports;
		} else if (i > R_MAPPER) {
			args[a++] = "--next-port";
			args[a++] = num_arg(slots, &nslot,
					    (unsigned long long)c[i - 1].port);
		}
		if (i == R_CLIENT) {
			args[a++] = "--requests";
			args[a++] = num_arg(slots, &nslot, (unsigned long long)o->requests);
			args[a++] = "--volume";
			args[a++] = num_arg(slots, &nslot, o->volume);
			args[a++] = "--seed";
			args[a++] = num_arg(slots, &nslot, o->seed);
			args[a++] = "--write-ratio";
			snprintf(slots[nslot], 64, "%.17g", o->write_ratio);
			args[a++] = slots[nslot++];
			args[a++] = "--rate";
			snprintf(slots[nslot], 64, "%.17g", o->rate);
			args[a++] = slots[nslot++];
		}
		if (o->hold && i <= R_B2) {
			args[a++] = "--hold";
			args[a++] = (char *)o->hold;
		}
		args[a] = NULL;
		err = spawn(&c[i], self, args);
		if (err) {
			fprintf(stderr, "blockstack: cannot start %s: %s\n", role_names[i],
				strerror(-err));
			goto out;
		}
		if (i == R_CLIENT)
			break;
		/* Wait until it listens: "PORT n". */
		err = child_line(&c[i], 10000);
		if (err != 1 || sscanf(c[i].line, "PORT %d", &c[i].port) != 1) {
			fprintf(stderr, "blockstack: %s did not start: %s\n", role_names[i],
				err == -ETIMEDOUT ? "no port reported within 10 s" :
				err == -EINTR ? "interrupted" : "it exited (see above)");
			goto out;
		}
	}

	/* The vm-client runs the requests; the rest follow its shutdown. */
	while (!c[R_CLIENT].reaped && !stop_sig) {
		if (waitpid(c[R_CLIENT].pid, &c[R_CLIENT].status, 0) == c[R_CLIENT].pid)
			c[R_CLIENT].reaped = 1;
		else if (errno != EINTR)
			break;
	}
	if (stop_sig) {
		fprintf(stderr, "blockstack: interrupted (%s); stopping the roles\n",
			strsignal(stop_sig));
		goto out;
	}
	if (reap(c, 10000)) {
		fprintf(stderr, "blockstack: roles still running 10 s after the vm-client "
			"finished; stopping them\n");
		stop_children(c, SIGTERM);
		if (reap(c, 2000)) {
			stop_children(c, SIGKILL);
			reap(c, 2000);
		}
	}
	ret = 0;

out:
	if (ret || stop_sig) {
		ret = 1;
		stop_children(c, SIGTERM);
		if (reap(c, 2000)) {
			stop_children(c, SIGKILL);
			reap(c, 2000);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (int i = 0; i < R_N; i++) {
		unsigned long long n;

		if (c[i].rd < 0)
			continue;
		while (child_line(&c[i], 1000) == 1) {
			if (sscanf(c[i].line, "SPANS %llu", &n) == 1)
				spans += n;
			else if (i == R_CLIENT)
				sscanf(c[i].line, "DONE %llu %llu %ld %llu", &writes,
				       &reads, &failed, &bytes);
		}
		close(c[i].rd);
		if (!c[i].reaped || !c[i].pid)
			continue;
		if (WIFSIGNALED(c[i].status)) {
			fprintf(stderr, "blockstack: %s (pid %d) was killed by signal %d (%s)\n",
				role_names[i], (int)c[i].pid, WTERMSIG(c[i].status),
				strsignal(WTERMSIG(c[i].status)));
			failed_roles++;
		} else if (WEXITSTATUS(c[i].status)) {
			if (!(i == R_CLIENT && failed > 0))
				fprintf(stderr, "blockstack: %s exited with status %d\n",
					role_names[i], WEXITSTATUS(c[i].status));
			failed_roles++;
		}
	}
	if (failed < 0) {
		fprintf(stderr, "blockstack: the vm-client did not report its requests\n");
		ret = 1;
	}
	if (failed > 0 || failed_roles)
		ret = 1;
	if (!o->quiet && failed >= 0) {
		double wall = (double)(t1.tv_sec - t0.tv_sec) +
			      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

		printf("blockstack: %llu requests (%llu writes, %llu reads), %ld failed, "
		       "%.1f MiB, %llu spans recorded, wall %.3f s (%.0f req/s), seed %llu\n",
		       writes + reads, writes, reads, failed, (double)bytes / 1048576.0,
		       spans, wall, wall > 0 ? (double)(writes + reads) / wall : 0.0,
		       (unsigned long long)o->seed);
		fflush(stdout);
	}
	if (tmpdir && nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "blockstack: cannot remove %s: %s\n", dir, strerror(errno));
	return ret;
}

enum {
	OPT_SEED = 256, OPT_OBJSIZE, OPT_VOLUME, OPT_HOLD, OPT_ROLE, OPT_NAME,
	OPT_NEXT, OPT_BPORTS, OPT_NOTIFY,
};

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "requests", required_argument, NULL, 'n' },
		{ "sample", required_argument, NULL, 's' },
		{ "write-ratio", required_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'b' },
		{ "dir", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "object-size", required_argument, NULL, OPT_OBJSIZE },
		{ "volume", required_argument, NULL, OPT_VOLUME },
		{ "hold", required_argument, NULL, OPT_HOLD },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		/* Internal: how the parent starts a role. */
		{ "role", required_argument, NULL, OPT_ROLE },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "next-port", required_argument, NULL, OPT_NEXT },
		{ "blocker-ports", required_argument, NULL, OPT_BPORTS },
		{ "notify-fd", required_argument, NULL, OPT_NOTIFY },
		{ 0 },
	};
	struct bs_opts o = {
		.requests = 100, .write_ratio = 0.7, .size = 32768,
		.volume = 16u << 20, .object_size = 16384, .notify_fd = -1,
	};
	char self[4096], *end;
	uint64_t v;
	ssize_t n;
	int c;

	o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	while ((c = getopt_long(argc, argv, "n:s:w:r:b:d:qh", lo, NULL)) != -1) {
		errno = 0;
		switch (c) {
		case 'n':
			o.requests = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || o.requests < 0)
				goto bad;
			break;
		case 's':
			o.sample = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || *optarg == '-')
				goto bad;
			o.sample_set = 1;
			break;
		case 'w':
			o.write_ratio = strtod(optarg, &end);
			if (errno || *end || end == optarg || o.write_ratio < 0 ||
			    o.write_ratio > 1)
				goto bad;
			break;
		case 'r':
			o.rate = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(o.rate >= 0) || o.rate > 1e6)
				goto bad;
			break;
		case 'b':
			if (parse_size(optarg, &v) || v > BS_MAX_DATA)
				goto bad;
			o.size = (uint32_t)v;
			break;
		case 'd': o.dir = optarg; break;
		case OPT_SEED:
			o.seed = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg)
				goto bad;
			break;
		case OPT_OBJSIZE:
			if (parse_size(optarg, &v) || v > BS_MAX_DATA)
				goto bad;
			o.object_size = (uint32_t)v;
			break;
		case OPT_VOLUME:
			if (parse_size(optarg, &v) || v > (1ull << 40))
				goto bad;
			o.volume = v;
			break;
		case OPT_HOLD:
			if (!strchr(optarg, ':') || strtol(strchr(optarg, ':') + 1, NULL, 10) < 1)
				goto bad;
			o.hold = optarg;
			break;
		case 'q': o.quiet = 1; break;
		case 'h': fputs(help, stdout); return 0;
		case OPT_ROLE: o.role = optarg; break;
		case OPT_NAME: o.name = optarg; break;
		case OPT_NEXT: o.next_port = atoi(optarg); break;
		case OPT_BPORTS:
			if (parse_ports(optarg, o.blocker_ports))
				goto bad;
			break;
		case OPT_NOTIFY: o.notify_fd = atoi(optarg); break;
		default:
			fprintf(stderr, "Run 'blockstack --help' for the options.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "blockstack: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.size > o.volume) {
		fprintf(stderr, "blockstack: --size %u is larger than the volume (%llu bytes)\n",
			o.size, (unsigned long long)o.volume);
		return 2;
	}

	if (bs_cpu_us(o.role && !strcmp(o.role, "blocker") ? o.name : o.role, &o.cpu_us))
		return 2;
	if (o.role) {
		if (!strcmp(o.role, "vm-client"))
			return role_client(&o);
		if (!strcmp(o.role, "composer"))
			return role_composer(&o);
		if (!strcmp(o.role, "mapper"))
			return role_mapper(&o);
		if (!strcmp(o.role, "blocker") && o.name && o.dir)
			return role_blocker(&o);
		fprintf(stderr, "blockstack: unknown --role '%s'\n", o.role);
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "blockstack: cannot find my own program: %s\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	return run_parent(&o, self);

bad:
	fprintf(stderr, "blockstack: bad value '%s' for %s\n", optarg, argv[optind - 1]);
	return 2;
}
