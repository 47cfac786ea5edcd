// SPDX-License-Identifier: MIT
/*
 * The collector as one object: start every part in order (store, writer,
 * extensions, agent listener, HTTP), stop them in reverse.  `fay
 * collector` (src/cli/cmd_collector.c) parses the options and waits for a
 * signal in between.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "collector/capture_rules.h"
#include "collector/auth.h"
#include "collector/collector_int.h"
#include "collector/ext_http.h"
#include "collector/requester.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/memlimit.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/version.h"

/*
 * Whether an OTLP listener's address may be skipped: "off" (skip, no
 * word), NULL for the default (skip with a warning when the port is taken:
 * another collector or OTLP receiver on this host has it).  An address
 * given must bind.  Returns the address to try, NULL for none.
 */
static const char *otlp_addr(const char *opt, const char *dflt, int *optional)
{
	*optional = !opt;
	if (opt && !strcmp(opt, "off"))
		return NULL;
	return opt ? opt : dflt;
}

/* Say why an optional OTLP listener is off, or fill err: 0 or -errno. */
static int otlp_listen_failed(const char *flag, const char *addr, int optional, int ret,
			      const char *why, char *err, size_t errlen)
{
	if (optional && ret == -EADDRINUSE) {
		pr_warn("collector: %s %s: the port is in use; running without it (give %s "
			"ADDR, or %s off)", flag, addr, flag, flag);
		return 0;
	}
	snprintf(err, errlen, "%s %s", flag, why);
	return ret;
}

/*
 * Split --autocomplete-keys "k1, k2" into c->ac_keys (blanks around a key
 * and empty keys dropped, a repeated key kept once) and tell the store.
 * 0 or -ENOMEM.
 */
static int set_autocomplete_keys(struct collector *c, const char *list)
{
	const char *p = list;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char *k, **nv;
		int dup = 0;

		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		for (size_t i = 0; i < c->nac_keys; i++)
			dup |= strlen(c->ac_keys[i]) == len && !strncmp(c->ac_keys[i], p, len);
		if (len && !dup) {
			k = strndup(p, len);
			nv = k ? realloc(c->ac_keys, sizeof(*nv) * (c->nac_keys + 1)) : NULL;
			if (!nv) {
				free(k);
				return -ENOMEM;
			}
			c->ac_keys = nv;
			c->ac_keys[c->nac_keys++] = k;
		}
		p = e ? e + 1 : NULL;
	}
	return store__set_autocomplete_keys(c->store, (const char *const *)c->ac_keys,
					     c->nac_keys);
}

/*
 * How many agent-port connections to take: --max-conns, within the
 * open-file limit (raised to its hard limit) less room for the store,
 * HTTP clients and spool files.
 */
static unsigned conns_limit(unsigned want)
{
	uint64_t nofile = net_raise_nofile(), room = nofile > 256 ? nofile - 256 : 64;

	if (!want)
		want = COLL_MAX_CONNS;
	if (want > room) {
		pr_warn("--max-conns %u: the open file limit is %llu; taking at most %llu agent connections (raise LimitNOFILE)",
			want, (unsigned long long)nofile, (unsigned long long)room);
		want = (unsigned)room;
	}
	return want;
}

/* What collector_start() adds to struct collector. */
struct collector_run {
	struct collector c;          /* first: collector_stop() gets &c */
	struct wire_server *ws;
	struct http_server *hs;
	struct http_server *otlp_hs;  /* --otlp-http (NULL: off) */
	struct otlp_grpc *grpc;       /* --otlp-grpc (NULL: off) */
	struct ctree *tree;          /* --parent: this collector under another */
};

static int is_loopback(const char *addr)
{
	return !strncmp(addr, "127.", 4) || !strncmp(addr, "[::1]", 5);
}

/*
 * Without tokens every client is trusted: then every listener must be on
 * loopback, unless --insecure says otherwise (logged loudly).
 */
static int check_exposure(struct collector_run *r, const struct collector_opts *o,
			  char *err, size_t errlen)
{
	const char *open_at = NULL;

	if (auth_on(r->c.auth)) {
		pr_info("collector: %zu token(s); every port but /health and the UI's files "
			"needs one", auth_count(r->c.auth));
		return 0;
	}
	if (!is_loopback(wire_server_addr(r->ws)))
		open_at = wire_server_addr(r->ws);
	else if (!is_loopback(http_server_addr(r->hs)))
		open_at = http_server_addr(r->hs);
	else if (r->otlp_hs && !is_loopback(http_server_addr(r->otlp_hs)))
		open_at = http_server_addr(r->otlp_hs);
	else if (r->grpc && !is_loopback(otlp_grpc_addr(r->grpc)))
		open_at = otlp_grpc_addr(r->grpc);
	if (!open_at)
		return 0;
	if (!o->insecure) {
		snprintf(err, errlen, "%s is not a loopback address and the collector has no "
			 "token: anyone who reaches it could read traces, send spans and load "
			 "BPF programs here.  Give --token-file FILE (or listen on 127.0.0.1), "
			 "or --insecure to accept that", open_at);
		return -EPERM;
	}
	pr_warn("collector: INSECURE: listening on %s with no token (--insecure): anyone "
		"who reaches this address may read traces and send spans (loading probes "
		"still needs a local user's right or the probe token: fay collector --help, "
		"ACCESS)", open_at);
	return 0;
}

/* A part of collector_start() failed: its reason, what then why, into
 * err; returns -errno of the failed call (-EINVAL when it set none). */
static int start_failed(char *err, size_t errlen, const char *what, const char *why)
{
	int e = errno ? -errno : -EINVAL;

	snprintf(err, errlen, "%s%s", what, why);
	return e;
}

/* The limits and sizes of o, with their defaults; --max-memory's default
 * is logged with where it comes from. */
static void coll_limits(struct collector *c, const struct collector_opts *o)
{
	c->token = o->token && *o->token ? o->token : NULL;
	c->max_body = o->max_body;
	c->ingest_queue = o->ingest_queue ? o->ingest_queue : COLL_INGEST_QUEUE;
	c->retention_us = o->retention_us;
	if (o->clickhouse) {
		c->write_linger_ns = o->ch_linger_set ? o->ch_linger_ns : COLL_CH_LINGER_DEFAULT_NS;
		c->write_batch = o->ch_batch ? o->ch_batch : COLL_CH_BATCH_DEFAULT;
	}
	c->allow_other_users = o->allow_other_users;
	if (o->max_memory) {
		c->mem.max = o->max_memory;
	} else {
		/* #20: half of what this collector may use, at most 1 GiB */
		char how[2200];
		uint64_t lim = mem_limit(how, sizeof(how));

		c->mem.max = lim ? lim / 2 : COLL_MAX_MEMORY;
		if (c->mem.max > COLL_MAX_MEMORY)
			c->mem.max = COLL_MAX_MEMORY;
		if (c->mem.max < COLL_MIN_MEMORY)
			c->mem.max = COLL_MIN_MEMORY;
		pr_info("collector: --max-memory %" PRIu64 " MiB: half of the %" PRIu64 " MiB "
			"this collector may use (%s), at most %llu MiB", c->mem.max >> 20,
			lim >> 20, how, COLL_MAX_MEMORY >> 20);
	}
}

/* Open the store of o (its name, for the log, into store_at), with its
 * free-space floor and retention.  0, or -errno with the reason in err. */
static int coll_open_store(struct collector *c, const struct collector_opts *o,
			   char *store_at, size_t at_len, char *err, size_t errlen)
{
	struct store_disk d;
	char why[512];

	if (o->clickhouse)
		snprintf(store_at, at_len, "clickhouse:%s%s%s", o->clickhouse,
			 o->clickhouse_cluster ? "#" : "",
			 o->clickhouse_cluster ? o->clickhouse_cluster : "");
	else
		snprintf(store_at, at_len, "%s", o->db);
	c->store = store__open(store_at, 0, why, sizeof(why));
	if (!c->store)
		return start_failed(err, errlen, "store: ", why);
	store__set_min_free(c->store, o->min_free, o->min_free_pct);
	store__disk(c->store, &d);
	if (d.total)
		pr_info("store: keeps %" PRIu64 " MiB of its file system's %" PRIu64
			" MiB free (%s; %" PRIu64 " MiB free now)", d.min_free >> 20,
			d.total >> 20, o->min_free || o->min_free_pct ? "--min-free" :
			"the default: 2%, at least twice the WAL's limit", d.avail >> 20);
	/* a TTL where the store has one; retention's deletes work without */
	if (store__set_retention(c->store, c->retention_us, why, sizeof(why)))
		pr_warn("store: the retention as a TTL: %s (old spans are still deleted"
			" by retention)", why);
	return 0;
}

/* Who may do what: the tokens, TLS, the probe token and group, and what
 * SIGHUP reads again.  0, or -errno with the reason in err. */
static int coll_access(struct collector *c, const struct collector_opts *o,
		       char *err, size_t errlen)
{
	char why[512], path[4200];

	snprintf(path, sizeof(path), "%s.agent-tokens", o->db);
	c->auth = auth_new(o->token_file, c->token, path, why, sizeof(why));
	if (!c->auth)
		return start_failed(err, errlen, "--token-file ", why);
	if (o->tls_cert || o->tls_key || o->tls_client_ca) {
		c->tls = tls_server_conf(o->tls_cert, o->tls_key, o->tls_client_ca, why,
					 sizeof(why));
		if (!c->tls)
			return start_failed(err, errlen, "TLS: ", why);
	}
	if (!auth_on(c->auth)) {
		/* #20: who may probe without tokens (requester.h) */
		snprintf(path, sizeof(path), "%s.probe-token", o->db);
		if (coll_probe_token_make(c, path, why, sizeof(why)))
			pr_warn("probe token: %s (only root, this collector's user and "
				"--probe-group may load probes)", why);
		else
			pr_info("probe token (loads probes as root; for the UI's Live query: "
				"http://HOST:PORT/#token=TOKEN): %s, readable by uid %u alone",
				path, (unsigned)getuid());
	}
	if (o->probe_group && coll_probe_group_set(c, o->probe_group, why, sizeof(why))) {
		snprintf(err, errlen, "--probe-group %s", why);
		return -EINVAL;
	}
	if (o->tls_client_ca_ports && !o->tls_client_ca) {
		snprintf(err, errlen, "--tls-client-ca-ports without --tls-client-ca");
		return -EINVAL;
	}
	c->mtls_ports = o->tls_client_ca_ports ? o->tls_client_ca_ports : COLL_PORTS_ALL;
	c->token_file = o->token_file;
	c->tls_cert = o->tls_cert;
	c->tls_key = o->tls_key;
	c->tls_client_ca = o->tls_client_ca;
	return 0;
}

/* What serves the ports: the modules (ext_http.h), the cluster, the
 * store's writer threads.  0, or -errno with the reason in err. */
static int coll_modules(struct collector *c, const struct collector_opts *o,
			char *err, size_t errlen)
{
	struct coll_ext_opts xo = o->ext;
	char why[512];
	int ret;

	if (set_autocomplete_keys(c, o->autocomplete_keys))
		goto nomem;
	xo.db = o->db;
	c->ext = coll_ext_new(c, &xo, why, sizeof(why));
	if (!c->ext)
		return start_failed(err, errlen, "", why);
	c->cluster = cluster_new();
	if (!c->cluster)
		goto nomem;
	c->writers = 1;
	if (o->clickhouse) {
		c->writers = o->ch_writers ? o->ch_writers : COLL_CH_WRITERS_DEFAULT;
		if (c->writers > store__writers(c->store))
			c->writers = store__writers(c->store);
	}
	c->ingest = ingest_new(c);
	if (!c->ingest) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the writer thread: %s", errstr(ret));
		return ret;
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* Listen on the agents', the HTTP and the OTLP ports, and say so.  0, or
 * -errno with the reason in err. */
static int coll_listen(struct collector_run *r, const struct collector_opts *o,
		       const char *store_at, char *err, size_t errlen)
{
	struct collector *c = &r->c;
	const char *addr;
	char why[512];
	int ret, optional;

	r->ws = wire_server_new(c, o->listen, conns_limit(o->max_conns), o->max_conns_per_peer,
				why, sizeof(why));
	if (!r->ws)
		return start_failed(err, errlen, "--listen ", why);
	r->hs = http_server_new(c, o->http, 0, why, sizeof(why));
	if (!r->hs)
		return start_failed(err, errlen, "--http ", why);
	if ((addr = otlp_addr(o->otlp_http, COLL_OTLP_HTTP_DEFAULT, &optional))) {
		r->otlp_hs = http_server_new(c, addr, 1, why, sizeof(why));
		if (!r->otlp_hs && (ret = otlp_listen_failed("--otlp-http", addr, optional,
							     errno ? -errno : -EINVAL, why,
							     err, errlen)))
			return ret;
	}
	if ((addr = otlp_addr(o->otlp_grpc, COLL_OTLP_GRPC_DEFAULT, &optional))) {
		r->grpc = otlp_grpc_new(c, addr, why, sizeof(why));
		if (!r->grpc && (ret = otlp_listen_failed("--otlp-grpc", addr, optional,
							  errno ? -errno : -EINVAL, why,
							  err, errlen)))
			return ret;
	}
	pr_info("collector %s: agents on %s%s, HTTP on %s%s, OTLP/HTTP on %s%s, OTLP/gRPC "
		"on %s, store %s (schema %d), retention %s%" PRIu64 "s",
		FAY_VERSION, wire_server_addr(r->ws), c->tls ? " (TLS)" : "",
		c->tls ? "https://" : "http://", http_server_addr(r->hs),
		r->otlp_hs ? c->tls ? "https://" : "http://" : "",
		r->otlp_hs ? http_server_addr(r->otlp_hs) : "off",
		r->grpc ? otlp_grpc_addr(r->grpc) : "off", store_at,
		store__backend_schema_version(c->store), c->retention_us ? "" : "off ",
		c->retention_us / 1000000);
	return 0;
}

/* The address collectors beside this one reach its agent port at:
 * --advertise, else the port's own address (the host name for a
 * wildcard one). */
static void advertise_addr(const struct collector_run *r, const struct collector_opts *o,
			   char *buf, size_t len)
{
	const char *a = wire_server_addr(r->ws), *port = strrchr(a, ':');
	char host[256] = "";

	if (o->advertise) {
		snprintf(buf, len, "%s", o->advertise);
	} else if (port && (!strncmp(a, "0.0.0.0:", 8) || !strncmp(a, "[::]:", 5))) {
		if (gethostname(host, sizeof(host) - 1))
			snprintf(host, sizeof(host), "localhost");
		snprintf(buf, len, "%s%s", host, port);
	} else {
		snprintf(buf, len, "%s", a);
	}
}

/* The standing queries and the capture rules kept beside the store, and
 * with --parent the link to the collector above.  0, or -errno with the
 * reason in err. */
static int coll_cluster_start(struct collector_run *r, const struct collector_opts *o,
			      char *err, size_t errlen)
{
	struct collector *c = &r->c;
	char why[512], dir[4200], adv[300];
	struct standing_net net = { .advertise = adv, .token = c->token };
	int ret;

	if (o->parent_tls_ca) {
		/* our own certificate, if any, for a parent (or the collector
		 * beside this one running the standing queries) that asks */
		c->parent_tls = tls_client_conf(o->parent_tls_ca, o->tls_cert, o->tls_key,
						why, sizeof(why));
		if (!c->parent_tls)
			return start_failed(err, errlen, "--parent-tls-ca: ", why);
	}
	net.tls = c->parent_tls;
	advertise_addr(r, o, adv, sizeof(adv));
	snprintf(dir, sizeof(dir), "%s.queries", o->db);
	/* under --parent, the root runs the shared ones: its queries reach
	 * this collector's hosts too */
	c->standing = standing_new(c->cluster, c->store, dir, o->parent ? NULL : &net, why,
				   sizeof(why));
	if (!c->standing) {
		snprintf(err, errlen, "standing queries: %s", why);
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s.captures", o->db);
	/* the list before the rules that add to it */
	ret = caplog_open(c, dir, why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "the list of captures: %s", why);
		return ret;
	}
	c->rules = crules_new(c, dir, why, sizeof(why));
	if (!c->rules) {
		snprintf(err, errlen, "capture rules: %s", why);
		return -EINVAL;
	}
	if (!o->parent)
		return 0;
	r->tree = ctree_start(c->cluster, o->parent, o->host, c->token, c->parent_tls, false);
	if (!r->tree) {
		ret = errno ? -errno : -EINVAL;
		snprintf(err, errlen, "--parent %s: %s", o->parent,
			 ret == -EINVAL ? "expected HOST:PORT" : errstr(ret));
		return ret;
	}
	pr_info("collector: an intermediate aggregator under %s", o->parent);
	return 0;
}

struct collector *collector_start(const struct collector_opts *o, char *err, size_t errlen)
{
	struct collector_run *r = calloc(1, sizeof(*r));
	struct collector *c;
	char store_at[2048];
	int ret;

	/* Thread per HTTP connection, per agent connection: without a cap
	 * each may keep an arena's high-water mark (common/heap.h). */
	heap_tune(COLL_MALLOC_ARENAS);
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	c = &r->c;
	coll_limits(c, o);
	pthread_mutex_init(&c->agents_lock, NULL);
	pthread_mutex_init(&c->captures_lock, NULL);
	pthread_mutex_init(&c->readers_lock, NULL);
	c->started_us = clock_realtime_ns() / 1000;
	if ((ret = coll_open_store(c, o, store_at, sizeof(store_at), err, errlen)) ||
	    (ret = coll_access(c, o, err, errlen)) ||
	    (ret = coll_modules(c, o, err, errlen)) ||
	    (ret = coll_listen(r, o, store_at, err, errlen)) ||
	    (ret = check_exposure(r, o, err, errlen)) ||
	    (ret = coll_cluster_start(r, o, err, errlen))) {
		collector_stop(c);
		return fay_err_ptr(ret);
	}
	__atomic_store_n(&c->gate, 1, __ATOMIC_RELEASE);
	return c;
}

int coll_ports_parse(const char *list, unsigned *ports, char *err, size_t errlen)
{
	static const char *const names[] = { "agent", "http", "otlp-http", "otlp-grpc" };
	const char *p = list;

	*ports = 0;
	while (*p) {
		size_t n = strcspn(p, ",");
		unsigned i;

		for (i = 0; i < 4; i++)
			if (strlen(names[i]) == n && !strncmp(p, names[i], n))
				break;
		if (i == 4) {
			snprintf(err, errlen, "'%.*s': not a port (agent, http, otlp-http, otlp-grpc)",
				 (int)n, p);
			return -EINVAL;
		}
		*ports |= 1u << i;
		p += n + (p[n] == ',');
	}
	if (!*ports) {
		snprintf(err, errlen, "no port named (agent, http, otlp-http, otlp-grpc)");
		return -EINVAL;
	}
	return 0;
}

int collector_reload(struct collector *c)
{
	char why[512];
	int ret = 0, r;

	if (c->token_file) {
		r = auth_reload(c->auth, c->token_file, c->token, why, sizeof(why));
		if (r)
			pr_warn("reload: --token-file refused, the tokens stay as they were: %s", why);
		else
			pr_info("reload: --token-file %s: %zu tokens", c->token_file,
				auth_count(c->auth));
		ret = ret ? ret : r;
	}
	if (c->tls) {
		r = tls_conf_reload(c->tls, c->tls_cert, c->tls_key, c->tls_client_ca, why,
				    sizeof(why));
		if (r)
			pr_warn("reload: TLS files refused, new handshakes go on with the old ones: %s",
				why);
		else
			pr_info("reload: TLS: %s%s%s read again; new handshakes use them",
				c->tls_cert, c->tls_client_ca ? " and " : "",
				c->tls_client_ca ? c->tls_client_ca : "");
		ret = ret ? ret : r;
	}
	if (!c->token_file && !c->tls)
		pr_info("reload: no --token-file and no TLS: nothing to read again");
	return ret;
}

size_t coll_conn_mem(const struct collector *c)
{
	return COLL_CONN_MEM + (c->tls ? COLL_CONN_TLS_MEM : 0);
}

int coll_gate_wait(struct collector *c)
{
	const struct timespec tick = { 0, 2000000 };
	int g;

	/* collector_start() takes milliseconds once the listeners are open */
	while (!(g = __atomic_load_n(&c->gate, __ATOMIC_ACQUIRE)))
		nanosleep(&tick, NULL);
	return g > 0;
}

void collector_stop(struct collector *c)
{
	struct collector_run *r = (struct collector_run *)c;

	if (!c)
		return;
	__atomic_store_n(&c->gate, -1, __ATOMIC_RELEASE);	/* no new connection served */
	ctree_stop(r->tree);	/* the parent's queries first: they use the rest */
	crules_free(c->rules);	/* before the cluster and the store it uses */
	c->rules = NULL;
	standing_free(c->standing);
	otlp_grpc_free(r->grpc);
	http_server_free(r->otlp_hs);
	http_server_free(r->hs);
	wire_server_free(r->ws);
	cluster_free(c->cluster);	/* after every connection and query ended */
	ingest_free(c->ingest);
	coll_ext_free(c->ext);
	auth_free(c->auth);
	tls_conf_free(c->tls);
	tls_conf_free(c->parent_tls);
	for (int i = 0; i < c->nreaders; i++)
		store__reader_free(c->readers[i]);
	store__close(c->store);
	coll_agents_free(c);
	for (size_t i = 0; i < c->nac_keys; i++)
		free(c->ac_keys[i]);
	free(c->ac_keys);
	pthread_mutex_destroy(&c->agents_lock);
	caplog_close(c);
	api_captures_free(c);
	pthread_mutex_destroy(&c->captures_lock);
	pthread_mutex_destroy(&c->readers_lock);
	free(r);
}
