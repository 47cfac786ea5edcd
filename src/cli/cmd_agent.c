// SPDX-License-Identifier: MIT
/*
 * `fay agent`: options and manual.  The work is in src/agent/ (agent_run,
 * agent_metrics_start).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/metrics_http.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/query_run.h"
#include "common/cgroup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/tls.h"

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    fay agent - drain the span rings of this host and ship them to a collector\n"
"\n"
"SYNOPSIS\n"
"    fay agent [--collector HOST:PORT] [--shm-dir DIR] [--state-dir DIR]\n"
"              [--spool-max SIZE] [--queue-max SIZE] [--flush-interval DUR]\n"
"              [--flight SIZE]\n"
"              [--stats-interval DUR] [--drain-nice N] [--shm-any-owner]\n"
"              [--allow-other-users] [--no-inject] [--cgroup PATH]\n"
"              [--no-containers | --containers-in CGROUP]\n"
"              [--host NAME] [--token-file FILE | --token-env VAR | --token T]\n"
"              [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]\n"
"              [--fsync] [--metrics ADDR] [-v]\n"
"\n"
"DESCRIPTION\n"
"    Every process using libfay records finished spans into lock-free rings in\n"
"    a shared-memory file, SHM-DIR/fay-<pid>-<instance>.shm.  The agent finds\n"
"    these files (a scan at start, then inotify), checks each header against\n"
"    the file (a corrupt file is reported once and skipped), drains every ring\n"
"    each flush interval (more often while a ring fills up), and groups the\n"
"    spans into batches.  A thread of its own does only that; another writes\n"
"    the batches to disk and ships them, so a slow disk, /proc or network\n"
"    never holds up the draining.\n"
"\n"
"    Each batch is written to the spool (STATE-DIR/spool) with the ring\n"
"    positions it ends at; STATE-DIR/cursors is rewritten about once a\n"
"    second and before a spool file is deleted.  So the agent can be killed\n"
"    at any moment: restarted, it resumes every ring exactly after the last\n"
"    span that reached the spool (spans it had read but not yet written are\n"
"    read again, or counted lost if the process overwrote them meanwhile).\n"
"    Spooled batches are sent to the collector, several in flight, and\n"
"    deleted when it acknowledges them; while the collector is away they\n"
"    wait in the spool (bounded by --spool-max: the oldest are evicted\n"
"    first, and counted) and the agent reconnects with exponential backoff\n"
"    (100 ms to 5 s, with jitter).  A collector that goes silent without\n"
"    closing the connection (link down) is noticed within about 8 s.\n"
"\n"
"    When a traced process exits (pidfd), its rings are drained a last time,\n"
"    the spans it never finished are counted as lost (\"process died\n"
"    mid-span\"), its counters are logged in one line and its file is\n"
"    removed.  Files whose process is already gone at start are drained and\n"
"    removed too.  Every loss is counted by reason and sent to the collector\n"
"    (STATS) and written to STATE-DIR/stats.json.\n"
"\n"
"    Cluster queries: the agent keeps a second connection to the collector\n"
"    (a query connection, beating every second) over which the collector\n"
"    sends FayQL queries (fay query --cluster, POST /api/query, standing\n"
"    queries).  Each runs in a thread of its own with the same engine as\n"
"    fay query; its host-level partial aggregates go back once per\n"
"    wall-clock-aligned window (never events).  A query this host cannot\n"
"    run is answered with the reason.  When the connection is lost every\n"
"    query's probes are detached; the collector sends them again once the\n"
"    agent is back.  Loading probes needs root or CAP_BPF and CAP_PERFMON.\n"
"    spans(...) queries need neither: the agent runs them in its in-process\n"
"    eBPF VM over every span it drains while they run (BlkKin's records\n"
"    merged into whole spans first); stats.json counts them under\n"
"    span_queries (spans_fed, blkin_given_up).\n"
"\n"
"    Flight recorder (--flight SIZE): a process started with FAY_RECORD=all\n"
"    records the spans head sampling (FAY_SAMPLE) did not choose too, marked\n"
"    unsampled.  The agent ships only the sampled ones, as always, and keeps\n"
"    the others in memory, in a buffer of SIZE bytes indexed by trace id;\n"
"    when it is full the oldest spans go first (counted: flight.dropped in\n"
"    stats.json, and a log line).  fay capture asks every agent, through\n"
"    the query connection, for the spans of one trace id or of the last N\n"
"    seconds, and the collector stores what they hold.  Without --flight,\n"
"    unsampled spans are drained and dropped (unsampled.dropped_no_flight).\n"
"\n"
"    SIGTERM or SIGINT: drain everything, spool it, try to send it for up to\n"
"    2 s, and exit 0.  SIGHUP: read --token-file and the TLS files (--tls-ca,\n"
"    --tls-cert, --tls-key) again; the next connections to the collector\n"
"    use them (those open now keep theirs).  A file that cannot be used is\n"
"    refused with the reason in the log (\"reload: ...\") and the old one\n"
"    kept.\n"
"\n"
"OPTIONS\n"
"    --collector HOST:PORT  the collector's agent port (default 127.0.0.1:9410;\n"
"                        [v6addr]:port for IPv6)\n"
"    --shm-dir DIR       where processes put their span files (default\n"
"                        $FAY_SHM_DIR, else /dev/shm)\n"
"    --state-dir DIR     spool, cursors, agent id (default /var/lib/fay/agent;\n"
"                        created if missing; one agent per directory)\n"
"    --spool-max SIZE    bound on the spool: 64k, 256M, 2G ... (default 256M)\n"
"    --queue-max SIZE    memory for drained batches waiting to be written to\n"
"                        the spool (default 16M, in 1M batches, at least 2M);\n"
"                        when it is full, rings are not drained until the\n"
"                        disk catches up (what they overwrite is counted)\n"
"    --flight SIZE       keep the spans head sampling did not choose (libfay's\n"
"                        FAY_RECORD=all) in SIZE bytes of memory for fay\n"
"                        capture: 64M, 1G ... (default off: they cost memory\n"
"                        on every host, and only processes started with\n"
"                        FAY_RECORD=all make any; at least 1M)\n"
"    --drain-nice N      nice value of the thread that drains the rings, -20\n"
"                        to 19 (default -10: a busy host delays it less;\n"
"                        needs CAP_SYS_NICE, else ignored; 0 leaves it)\n"
"    --shm-any-owner     read shm files whatever their owner (default: a file\n"
"                        naming a running process must belong to that\n"
"                        process's user, the agent's user or root)\n"
"    --no-containers     do not look into containers' /dev/shm (default: once\n"
"                        a second the agent lists every process's mount\n"
"                        namespace and root; each other than its own leads\n"
"                        to that root's /dev/shm, resolved inside it, never\n"
"                        followed out of it, and drained as --shm-dir is;\n"
"                        spans get container.id or container.name tags\n"
"                        from the process's cgroup)\n"
"    --containers-in CGROUP  look only into the containers of processes in this\n"
"                        cgroup v2 subtree (e.g. /machine.slice)\n"
"    --allow-other-users  when the agent runs as a non-root user, let cluster\n"
"                        queries probe every user's processes; without it they\n"
"                        probe only those of the agent's own user (the\n"
"                        requester: the collector's clients have no uid here)\n"
"    --no-inject         never load fay's runtime (libfay-probe.so) into a\n"
"                        running process: a cluster query's\n"
"                        process(PID).function(...) on a process not started\n"
"                        with fay run uses a uprobe (by default it is loaded\n"
"                        with ptrace when allowed, as fay query's auto mode)\n"
"    --cgroup PATH       the processes this agent speaks for: cluster queries\n"
"                        see only tasks in cgroup v2 PATH (under the cgroup2\n"
"                        root: /sys/fs/cgroup/PATH) and the cgroups below it,\n"
"                        from every source but spans(...): one agent per\n"
"                        tenant or container on a shared host, or several\n"
"                        hosts simulated on one kernel.  The cgroup must exist\n"
"                        when the agent starts; a query whose inline process\n"
"                        is outside it is refused (default: every task)\n"
"    --flush-interval DUR  how often rings are drained and a batch is cut:\n"
"                        20ms, 1s ... (default 20ms)\n"
"    --stats-interval DUR  how often counters are sent and written (default 10s)\n"
"    --host NAME         this host's name: sent in HELLO, shown by the collector\n"
"                        (Hosts page, /api/ui/hosts), the host of cluster\n"
"                        queries (default: gethostname(); at most 255 bytes)\n"
OPT_CLIENT_TOKEN_HELP("                        ", "write")
"                        sent in HELLO; the collector binds this agent's id\n"
"                        to it (a collector's token file line, TOKEN SCOPES\n"
"                        NAME, works too)\n"
"    --token-env VAR     the token is in environment variable VAR (systemd's\n"
"                        LoadCredential= or EnvironmentFile=)\n"
"    --tls-ca FILE       speak TLS (1.2 or 1.3) to the collector (fay collector\n"
"                        --tls-cert) and accept only a certificate that this CA\n"
"                        (PEM) signed and that names the --collector host (a name\n"
"                        or an address in its subjectAltName)\n"
"    --tls-cert FILE --tls-key FILE\n"
"                        this agent's certificate and key (PEM; the key not\n"
"                        readable by every user), for a collector started with\n"
"                        --tls-client-ca (mutual TLS)\n"
"    --fsync             fsync each batch and the cursor file: the spool also\n"
"                        survives power loss, at a cost per batch\n"
"    --metrics ADDR      serve Prometheus text at http://ADDR/metrics: records\n"
"                        lost by reason, processes, probe hits, shipping and\n"
"                        spool counters (from STATE-DIR/stats.json, as fresh as\n"
"                        --stats-interval); ADDR is HOST:PORT or :PORT (loopback)\n"
"    -v, --verbose       debug logging (same as FAY_LOG_LEVEL=debug)\n"
"    -h, --help          this manual\n"
"\n"
"EXAMPLES\n"
"    fay agent\n"
"        Defaults: /dev/shm, collector on 127.0.0.1:9410.\n"
"    fay agent --collector traces.example:9410 --spool-max 1G \\\n"
"        --token-file /etc/fay/agent-token\n"
"    FAY_SHM_DIR=/tmp/fay fay agent --state-dir /tmp/fay-agent -v\n"
"\n"
"EXIT STATUS\n"
"    0 stopped by SIGTERM/SIGINT, 1 could not start (state directory in use or\n"
"    not writable, shm directory not watchable), 2 usage error.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_SHM_DIR     default for --shm-dir\n"
"    FAY_TOKEN       default for --token\n"
"    FAY_LOG_LEVEL   debug, info (default), warn, error\n"
"    FAY_AGENT_CRASH_AFTER_SPOOL, FAY_AGENT_TEST_HOLD_SPOOL  test points (tests only)\n"
"\n"
"FILES\n"
"    STATE-DIR/spool/<seq>.batch  unacknowledged batches (wire frame + cursors)\n"
"    STATE-DIR/cursors            ring positions covered by the spool\n"
"    STATE-DIR/agent_id           this agent's random 128-bit id\n"
"    STATE-DIR/stats.json         the latest counters\n"
"    See docs/ABI.md, \"Agent spool and cursor files\".\n");
}

enum { O_COLL = 256, O_SHM, O_STATE, O_SPOOL, O_FLUSH, O_STATS, O_HOST,
       O_FSYNC, O_METRICS, O_QUEUE, O_NICE, O_ANYOWNER, O_NOCTR, O_CTRIN,
       O_OTHERUSERS, O_NOINJECT, O_CGROUP, O_TOKEN_ENV, O_FLIGHT };

/* What the command line gives beside struct agent_opts. */
struct agent_cli {
	struct agent_opts o;
	struct opt_client_token tok;	/* o.token points into it */
	const char *metrics_addr;	/* --metrics */
	const char *tls_ca, *tls_cert, *tls_key;
};

/* --spool-max, --queue-max, --flight: 0, or 2 after saying why. */
static int size_opt(int c, const char *arg, struct agent_opts *o)
{
	switch (c) {
	case O_SPOOL:
		if (opt_parse_size(arg, &o->spool_max) || o->spool_max < 4096) {
			fprintf(stderr, "error: --spool-max '%s': want a size of at least 4k (64k, 256M, 2G)\n",
				arg);
			return 2;
		}
		return 0;
	case O_QUEUE:
		if (opt_parse_size(arg, &o->queue_max) || o->queue_max < (2u << 20) ||
		    o->queue_max > (64ull << 30)) {
			fprintf(stderr, "error: --queue-max '%s': want a size from 2M to 64G (16M, 256M)\n",
				arg);
			return 2;
		}
		return 0;
	default:	/* O_FLIGHT */
		if (opt_parse_size(arg, &o->flight_bytes) || o->flight_bytes < (1u << 20) ||
		    o->flight_bytes > (1ull << 40)) {
			fprintf(stderr, "error: --flight '%s': want a size from 1M to 1T (64M, 1G)\n",
				arg);
			return 2;
		}
		return 0;
	}
}

/* --drain-nice, --flush-interval, --stats-interval: 0, or 2 after saying why. */
static int number_opt(int c, const char *arg, struct agent_opts *o)
{
	char *end;
	uint64_t ns;
	long v;

	if (c == O_NICE) {
		v = strtol(arg, &end, 10);
		if (!*arg || *end || v < -20 || v > 19) {
			fprintf(stderr, "error: --drain-nice '%s': want a number from -20 to 19\n",
				arg);
			return 2;
		}
		o->drain_nice = (int)v;
		return 0;
	}
	if (clock_parse_duration(arg, &ns) || ns < 1000000 || ns > 3600 * 1000000000ull) {
		fprintf(stderr, "error: --%s '%s': want a duration from 1ms to 1h (20ms, 1s)\n",
			c == O_FLUSH ? "flush-interval" : "stats-interval", arg);
		return 2;
	}
	if (c == O_FLUSH)
		o->flush_ns = ns;
	else
		o->stats_ns = ns;
	return 0;
}

/* Which processes the agent reads and probes: 0, or 2 after saying why. */
static int scope_opt(int c, const char *arg, struct agent_opts *o)
{
	char canon[4096], why[512];
	uint64_t id;
	int level;

	switch (c) {
	case O_CTRIN:
		if (arg[0] != '/') {
			fprintf(stderr, "error: --containers-in '%s': want a cgroup path "
				"starting with '/'\n", arg);
			return 2;
		}
		o->containers_in = arg;
		return 0;
	case O_CGROUP:
		if (cgroup_scope_of(arg, &id, &level, canon, sizeof(canon), why, sizeof(why))) {
			fprintf(stderr, "error: --cgroup: %s\n", why);
			return 2;
		}
		o->cgroup = arg;
		return 0;
	case O_NOCTR:
		o->no_containers = 1;
		return 0;
	case O_ANYOWNER:
		o->shm_any_owner = 1;
		return 0;
	case O_OTHERUSERS:
		o->allow_other_users = 1;
		return 0;
	default:	/* O_NOINJECT */
		o->no_inject = 1;
		return 0;
	}
}

/* How the agent reaches its collector: 0, or 2 after saying why. */
static int link_opt(int c, const char *arg, struct agent_cli *a)
{
	switch (c) {
	case O_COLL:
		a->o.collector = arg;
		return 0;
	case O_HOST:
		if (!*arg || strlen(arg) > 255) {
			fprintf(stderr, "error: --host '%s': want a name of 1 to 255 bytes\n", arg);
			return 2;
		}
		a->o.host = arg;
		return 0;
	case OPT_TOKEN:
	case OPT_TOKEN_FILE:
		if (opt_client_token(c, arg, &a->tok) < 0)
			return 2;
		a->o.token = a->tok.token;
		a->o.token_file = a->tok.file;
		return 0;
	case O_TOKEN_ENV:
		a->o.token_file = NULL;
		a->o.token = getenv(arg);
		if (!a->o.token || !*a->o.token) {
			fprintf(stderr, "error: --token-env %s: the variable is not set or empty\n",
				arg);
			return 2;
		}
		return 0;
	case OPT_TLS_CA:
		a->tls_ca = arg;
		return 0;
	case OPT_TLS_CERT:
		a->tls_cert = arg;
		return 0;
	default:	/* OPT_TLS_KEY */
		a->tls_key = arg;
		return 0;
	}
}

/*
 * Read the options into a.  Returns -1 to go on, else the exit status
 * (0 after --help, 2 after saying what is wrong).
 */
static int parse_args(int argc, char **argv, struct agent_cli *a)
{
	static const struct option lopts[] = {
		{ "collector", required_argument, NULL, O_COLL },
		{ "shm-dir", required_argument, NULL, O_SHM },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "spool-max", required_argument, NULL, O_SPOOL },
		{ "queue-max", required_argument, NULL, O_QUEUE },
		{ "flight", required_argument, NULL, O_FLIGHT },
		{ "drain-nice", required_argument, NULL, O_NICE },
		{ "shm-any-owner", no_argument, NULL, O_ANYOWNER },
		{ "no-containers", no_argument, NULL, O_NOCTR },
		{ "containers-in", required_argument, NULL, O_CTRIN },
		{ "allow-other-users", no_argument, NULL, O_OTHERUSERS },
		{ "no-inject", no_argument, NULL, O_NOINJECT },
		{ "cgroup", required_argument, NULL, O_CGROUP },
		{ "flush-interval", required_argument, NULL, O_FLUSH },
		{ "stats-interval", required_argument, NULL, O_STATS },
		{ "host", required_argument, NULL, O_HOST },
		OPT_CLIENT_TOKEN_ROWS,
		{ "token-env", required_argument, NULL, O_TOKEN_ENV },
		OPT_CLIENT_TLS_ROWS,
		{ "fsync", no_argument, NULL, O_FSYNC },
		{ "metrics", required_argument, NULL, O_METRICS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, rc = 0;

	optind = 1;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, "+vh", lopts, NULL)) != -1) {
		switch (c) {
		case O_SHM:
			a->o.shm_dir = optarg;
			break;
		case O_STATE:
			a->o.state_dir = optarg;
			break;
		case O_FSYNC:
			a->o.fsync = 1;
			break;
		case O_METRICS:
			a->metrics_addr = optarg;
			break;
		case O_SPOOL: case O_QUEUE: case O_FLIGHT:
			rc = size_opt(c, optarg, &a->o);
			break;
		case O_NICE: case O_FLUSH: case O_STATS:
			rc = number_opt(c, optarg, &a->o);
			break;
		case O_CTRIN: case O_CGROUP: case O_NOCTR: case O_ANYOWNER: case O_OTHERUSERS:
		case O_NOINJECT:
			rc = scope_opt(c, optarg, &a->o);
			break;
		case O_COLL: case O_HOST: case OPT_TOKEN: case OPT_TOKEN_FILE: case O_TOKEN_ENV:
		case OPT_TLS_CA: case OPT_TLS_CERT: case OPT_TLS_KEY:
			rc = link_opt(c, optarg, a);
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (optopt && optopt < 256)
				fprintf(stderr, "error: unknown option '-%c'\n", optopt);
			else
				fprintf(stderr, "error: unknown option or missing value: '%s'\n",
					argv[optind - 1]);
			fprintf(stderr, "Run 'fay agent --help' for the manual.\n");
			return 2;
		}
	}
	if (!rc && optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n"
			"Run 'fay agent --help' for the manual.\n", argv[optind]);
		rc = 2;
	}
	return rc ? rc : -1;
}

/* --tls-ca, --tls-cert, --tls-key into a->o.tls: 0, or 2 after saying why. */
static int tls_setup(struct agent_cli *a)
{
	char err[600];

	if (!a->tls_ca && !a->tls_cert && !a->tls_key)
		return 0;
	if (!a->tls_ca) {
		fprintf(stderr, "error: --tls-cert/--tls-key need --tls-ca (the CA of the "
			"collector's certificate)\n");
		return 2;
	}
	a->o.tls = tls_client_conf(a->tls_ca, a->tls_cert, a->tls_key, err, sizeof(err));
	a->o.tls_ca = a->tls_ca;
	a->o.tls_cert = a->tls_cert;
	a->o.tls_key = a->tls_key;
	if (!a->o.tls) {
		fprintf(stderr, "error: TLS: %s\n", err);
		return 2;
	}
	return 0;
}

int cmd_agent(int argc, char **argv)
{
	struct agent_cli a = { .o = {
		.collector = "127.0.0.1:9410",
		.shm_dir = getenv("FAY_SHM_DIR"),
		.state_dir = "/var/lib/fay/agent",
		.spool_max = 256ull << 20,
		.queue_max = 16ull << 20,
		.drain_nice = -10,
		.flush_ns = 20 * 1000000ull,
		.stats_ns = 10 * 1000000000ull,
	} };
	struct agent_opts *o = &a.o;
	char hostname[256], probe_lib[4096], path[4096], err[256];
	struct agent_metrics *metrics = NULL;
	int rc;

	if (!o->shm_dir || !*o->shm_dir)
		o->shm_dir = "/dev/shm";
	opt_client_token_init(&a.tok);
	o->token = a.tok.token;
	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	rc = tls_setup(&a);
	if (rc)
		return rc;
	if (!o->host) {
		if (gethostname(hostname, sizeof(hostname)))
			snprintf(hostname, sizeof(hostname), "localhost");
		hostname[sizeof(hostname) - 1] = '\0';
		o->host = hostname;
	}
	if (a.metrics_addr) {
		snprintf(path, sizeof(path), "%s/stats.json", o->state_dir);
		metrics = agent_metrics_start(a.metrics_addr, path, err, sizeof(err));
		if (!metrics) {
			fprintf(stderr, "error: --metrics %s\n", err);
			tls_conf_free(o->tls);
			return 1;
		}
		pr_info("agent: metrics on http://%s/metrics", agent_metrics_addr(metrics));
	}
	if (!o->no_inject && !fay_probe_lib(probe_lib, sizeof(probe_lib)))
		o->inject_lib = probe_lib;
	rc = agent_run(o) ? 1 : 0;
	tls_conf_free(o->tls);
	agent_metrics_stop(metrics);
	return rc;
}
