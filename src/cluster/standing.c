// SPDX-License-Identifier: MIT
/*
 * Standing cluster queries (standing.h).  Each runs on a thread of its
 * own through cluster_query_run(), with a sink that keeps the latest
 * merged window (for /metrics) and writes every window into the store
 * (store__put_windows(): table query_windows, host '*').  History files
 * of older versions (DIR/NAME.ndjson, NAME.ndjson.1) are imported into
 * the store at start, once (import_history()).  When no agent is connected yet, or the cluster refuses the
 * query for now, it is retried every STANDING_RETRY_MS until dropped.
 *
 * With a store that several collectors share (ClickHouse,
 * store__standing_shared()), the definitions are the store's
 * (standing_queries): a sync thread reads them every STANDING_SYNC_MS,
 * compiles the new ones and forgets the dropped ones, and renews the
 * store's lease (standing_lease, STANDING_LEASE_MS): only the lease's
 * holder runs the queries, the others list them; a holder that dies
 * stops renewing and another takes over once the lease ran out (one
 * that stops gives it back at once).  Adding and dropping write the
 * store, then sync.  With SQLite the collector keeps its own in
 * DIR/queries.json and runs them all.
 *
 * Collectors side by side on such a store (not under --parent) know each
 * other: at each sync every one beats in the store's collectors table
 * (its --advertise address, its lease id, its agents' hosts), and reads
 * the others' rows.  One that does not hold the lease links to the
 * holder's address as a child collector links to its parent (ctree.c,
 * flat), so the holder asks it for its hosts' answers as it asks a
 * child; the holder counts every collector beside it (cluster_set_flat(),
 * cluster_qopts.flat): one that does not answer a window, or is not
 * linked (dead: its beat goes stale), is missing in it with the hosts
 * it last named, until it stops cleanly (a row with gone) or for
 * STANDING_FORGET_MS after its last beat.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "common/clock.h"
#include "common/file_atomic.h"
#include "common/log.h"
#include "common/prom.h"
#include "engine/driver.h"
#include "store/store.h"

#define STANDING_RETRY_MS	2000
#define STANDING_SYNC_MS	2000	/* shared: definitions and lease read */
#define STANDING_LEASE_MS	10000	/* shared: a lease not renewed runs out */
#define STANDING_FORGET_MS	3600000	/* shared: a collector silent that long
					 * is no longer counted missing */

struct sq {
	struct standing *s;
	char name[STANDING_NAME_MAX + 1];
	char *text;
	uint64_t grace_ns, created_ms, windows;
	struct query *q;
	const struct plan *p;
	volatile int stop;
	pthread_t thread;
	bool running;			/* its thread runs (shared: the lease's) */
	json_t *last;			/* the latest window line (under s->lock) */
	/* the rows of the window under way: its hosts' answers, then the
	 * merged one, stored together (one INSERT); each row owns its
	 * answer's text and one more string (missing, or a host's name) */
	struct store_window *pend;
	char **pend_text, **pend_aux;
	size_t npend, cappend;
	struct sq *next;
};

struct standing {
	struct cluster *cl;
	struct store *st;
	char dir[4096];
	pthread_mutex_t lock;		/* the list, each sq's last and windows */
	struct sq *list;
	unsigned n;
	/* a store shared by several collectors: definitions in the store */
	bool shared;
	bool may_run;			/* it may take the lease (not under --parent) */
	bool holder;			/* this collector holds the lease */
	char me[128];			/* its id in the lease */
	char who[128];			/* the lease's holder, last read */
	/* shared, may_run: this collector beside the others */
	struct standing_net net;
	char addr[256];			/* its --advertise address (its id) */
	char link_addr[256];		/* the holder it links to ("": none) */
	struct ctree *link;
	pthread_mutex_t sync_lock;	/* one sync() at a time */
	pthread_t sync_thread;
	bool sync_started;
	volatile int stop;
};

bool standing_name_ok(const char *n)
{
	size_t len = strlen(n);

	return len >= 1 && len <= STANDING_NAME_MAX &&
	       strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == len;
}

/* ---- definitions on disk -------------------------------------------------- */

/* Write queries.json whole (file_write_atomic).  Under s->lock. */
static int save(struct standing *s)
{
	json_t *a = json_array(), *doc;
	char path[4200], *text;
	int err;

	for (struct sq *q = s->list; a && q; q = q->next)
		json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I}", "name", q->name,
			"query", q->text, "grace_ms", (json_int_t)(q->grace_ns / 1000000),
			"created_ms", (json_int_t)q->created_ms));
	doc = a ? json_pack("{s:o}", "queries", a) : NULL;
	text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
	json_decref(doc);
	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/queries.json", s->dir);
	err = file_write_atomic(path, text, strlen(text), 0600, 0);
	free(text);
	return err;
}

/* ---- running -------------------------------------------------------------- */

/* A window line (parsed: j; its text: json) as the store's row of the
 * merged answer; written_us: when.  Strings point into j and json. */
static bool window_row(const char *name, json_t *j, const char *json, uint64_t written_us,
		       char **missing, struct store_window *w)
{
	json_t *h = json_object_get(j, "hosts");
	json_int_t start = json_integer_value(json_object_get(j, "start_ns"));
	json_int_t end = json_integer_value(json_object_get(j, "end_ns"));

	if (!json_is_integer(json_object_get(j, "end_ns")) || start < 0 || end < 0)
		return false;
	*missing = json_object_get(h, "missing") ?
		   json_dumps(json_object_get(h, "missing"), JSON_COMPACT | JSON_ENCODE_ANY) :
		   NULL;
	*w = (struct store_window){
		.name = name,
		.start_us = (uint64_t)start / 1000,
		.end_us = (uint64_t)end / 1000,
		.host = STORE_WINDOW_MERGED,
		.answer = json,
		.asked = (uint32_t)json_integer_value(json_object_get(h, "asked")),
		.answered = (uint32_t)json_integer_value(json_object_get(h, "answered")),
		.missing = *missing ? *missing : "[]",
		.provisional = json_is_true(json_object_get(j, "provisional")),
		.amended = json_is_true(json_object_get(j, "amended")),
		.written_us = written_us,
	};
	return true;
}

/* Add a row to q's pending ones, taking text and aux (the strings it
 * points to).  false: no memory (both freed). */
static bool pend_add(struct sq *q, const struct store_window *w, char *text, char *aux)
{
	if (q->npend == q->cappend) {
		size_t cap = q->cappend ? q->cappend * 2 : 8;
		struct store_window *v = realloc(q->pend, cap * sizeof(*v));
		char **t = v ? realloc(q->pend_text, cap * sizeof(*t)) : NULL;
		char **m = t ? realloc(q->pend_aux, cap * sizeof(*m)) : NULL;

		if (v)
			q->pend = v;
		if (t)
			q->pend_text = t;
		if (!m) {
			free(text);
			free(aux);
			return false;
		}
		q->pend_aux = m;
		q->cappend = cap;
	}
	q->pend[q->npend] = *w;
	q->pend_text[q->npend] = text;
	q->pend_aux[q->npend] = aux;
	q->npend++;
	return true;
}

/* Store the pending rows (a failure is logged) and forget them. */
static void pend_flush(struct sq *q)
{
	char err[512] = "";
	int ret = q->npend ? store__put_windows(q->s->st, q->pend, q->npend, err, sizeof(err)) : 0;

	if (ret)
		pr_warn("standing query %s: a window not stored: %s", q->name,
			err[0] ? err : strerror(-ret));
	for (size_t i = 0; i < q->npend; i++) {
		free(q->pend_text[i]);
		free(q->pend_aux[i]);
	}
	q->npend = 0;
}

/* A "host_window" line (j; its text json): that host's row, pending
 * until its window's merged line. */
static void put_host(struct sq *q, json_t *j, const char *json, size_t len)
{
	json_t *h = json_object_get(j, "host");
	json_int_t start = json_integer_value(json_object_get(j, "start_ns"));
	json_int_t end = json_integer_value(json_object_get(j, "end_ns"));
	char *text = strndup(json, len);
	struct store_window w = {
		.name = q->name, .start_us = (uint64_t)start / 1000, .end_us = (uint64_t)end / 1000,
		.host = json_string_value(h), .answer = text, .asked = 1, .answered = 1,
		.missing = "[]", .written_us = clock_realtime_ns() / 1000,
	};

	if (!text || !json_is_string(h) || start < 0 || end < 0 || !*w.host ||
	    !strcmp(w.host, STORE_WINDOW_MERGED)) {
		free(text);
		return;
	}
	/* the host name lives in j: the row keeps a copy */
	if (!(w.host = strdup(w.host)))
		free(text);
	else
		pend_add(q, &w, text, (char *)w.host);
}

/* A merged window line: its row, stored with its hosts' rows. */
static void put_window(struct sq *q, json_t *j, const char *json, size_t len)
{
	char *text = strndup(json, len), *missing = NULL;
	struct store_window w;

	if (text && window_row(q->name, j, text, clock_realtime_ns() / 1000, &missing, &w)) {
		if (!pend_add(q, &w, text, missing))
			pr_warn("standing query %s: a window not stored: out of memory", q->name);
	} else {
		free(text);
		free(missing);
	}
	pend_flush(q);
}

static int on_line(void *ctx, const char *json, size_t len)
{
	struct sq *q = ctx;
	json_t *j = json_loadb(json, len, 0, NULL), *t = json_object_get(j, "type");

	if (json_is_string(t) && !strcmp(json_string_value(t), "host_window"))
		put_host(q, j, json, len);
	if (json_is_string(t) && !strcmp(json_string_value(t), "window")) {
		put_window(q, j, json, len);
		pthread_mutex_lock(&q->s->lock);
		json_decref(q->last);
		q->last = json_incref(j);
		q->windows++;
		pthread_mutex_unlock(&q->s->lock);
	}
	json_decref(j);
	return q->stop ? -EPIPE : 0;
}

static void *sq_main(void *arg)
{
	struct sq *q = arg;
	struct cluster_qopts o = { .grace_ns = q->grace_ns, .all = true,
				   .host_answers = true, .flat = q->s->shared };
	struct qengine_env env = { .emit = on_line, .ctx = q, .stop = &q->stop };

	while (!q->stop) {
		char err[2048] = "";
		int ret = cluster_query_run(q->s->cl, q->q, q->p, q->text, &o, &env,
					    err, sizeof(err));

		if (q->stop)
			break;
		if (ret)
			pr_debug("standing query %s: %s; trying again", q->name,
				 err[0] ? err : strerror(-ret));
		for (int w = 0; w < STANDING_RETRY_MS && !q->stop; w += 50)
			poll(NULL, 0, 50);
	}
	return NULL;
}

static void sq_free(struct sq *q)
{
	if (!q)
		return;
	query_free(q->q);
	json_decref(q->last);
	pend_flush(q);		/* nothing pending unless a window was cut short */
	free(q->pend);
	free(q->pend_text);
	free(q->pend_aux);
	free(q->text);
	free(q);
}

/* A standing query compiled, not started (not yet in the list). */
static struct sq *sq_new(struct standing *s, const char *name, const char *text,
			   uint64_t grace_ns, uint64_t created_ms, char *err, size_t errlen,
			   int *line, int *col)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct sq *q = calloc(1, sizeof(*q));

	if (!q || !(q->text = strdup(text))) {
		free(q);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	q->s = s;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->grace_ns = grace_ns;
	q->created_ms = created_ms;
	q->q = engine_plan_text("<standing query>", text, strlen(text), &qo, &q->p, err, errlen);
	if (!q->q) {
		struct query *tmp = query_new("<standing query>", text, strlen(text), &qo);

		if (tmp && line && col) {	/* where, for the 400 */
			query_plan(tmp, &q->p);
			query_error_pos(tmp, line, col);
		}
		query_free(tmp);
		sq_free(q);
		return NULL;
	}
	if ((q->p->mode != PLAN_AGGREGATE || !q->p->window_ns) &&
	    (q->p->mode != PLAN_STREAM || !q->p->keep_ns)) {
		snprintf(err, errlen, "a standing query needs aggregates and 'window DUR' (its windows are its history), or events in keep mode ('keep DUR': each host keeps them for fay capture --query)");
		sq_free(q);
		return NULL;
	}
	return q;
}

/* Start q's thread.  0 or -errno (logged). */
static int sq_run(struct sq *q)
{
	q->stop = 0;
	if (pthread_create(&q->thread, NULL, sq_main, q)) {
		pr_warn("standing query %s: cannot start a thread", q->name);
		return -EAGAIN;
	}
	q->running = true;
	return 0;
}

/* A standing query compiled and started (not yet in the list). */
static struct sq *sq_start(struct standing *s, const char *name, const char *text,
			   uint64_t grace_ns, uint64_t created_ms, char *err, size_t errlen,
			   int *line, int *col)
{
	struct sq *q = sq_new(s, name, text, grace_ns, created_ms, err, errlen, line, col);

	if (q && sq_run(q)) {
		snprintf(err, errlen, "cannot start a thread");
		sq_free(q);
		return NULL;
	}
	return q;
}

/* Stop q's thread, if it runs (its agents detach the probes). */
static void sq_halt(struct sq *q)
{
	if (!q->running)
		return;
	q->stop = 1;
	pthread_join(q->thread, NULL);
	q->running = false;
}

static void sq_stop(struct sq *q)
{
	sq_halt(q);
	sq_free(q);
}

/* ---- history files of older versions ---------------------------------------- */

#define IMPORT_BATCH 256

/* Store the window lines of file path as windows of query name, a batch
 * at a time (written_us: a line's "t", so an import run again writes the
 * same rows).  0 (a file absent is none) or -errno with a reason in err. */
static int import_file(struct standing *s, const char *name, const char *path,
		       size_t *lines, char *err, size_t errlen)
{
	struct store_window w[IMPORT_BATCH];
	char *texts[IMPORT_BATCH], *missing[IMPORT_BATCH], *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;
	int ret = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		len = getline(&line, &cap, f);
		if (len > 0) {
			json_t *j = json_loadb(line, (size_t)len, 0, NULL);
			json_t *t = json_object_get(j, "type");
			uint64_t when = (uint64_t)json_integer_value(json_object_get(j, "t")) * 1000;

			line[strcspn(line, "\n")] = '\0';
			texts[n] = strdup(line);	/* the row's answer: the line */
			if (j && texts[n] && json_is_string(t) &&
			    !strcmp(json_string_value(t), "window") &&
			    window_row(name, j, texts[n], when, &missing[n], &w[n])) {
				json_decref(j);
				n++;
			} else {
				free(texts[n]);	/* a line cut by a crash, or not a window */
				json_decref(j);
			}
		}
		if (n && (n == IMPORT_BATCH || len <= 0)) {
			if (!ret)
				ret = store__put_windows(s->st, w, n, err, errlen);
			*lines += n;
			for (size_t i = 0; i < n; i++) {
				free(missing[i]);
				free(texts[i]);
			}
			n = 0;
		}
		if (len <= 0 || ret)
			break;
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * Import every DIR/NAME.ndjson.1 and NAME.ndjson (the history files of
 * versions before the store kept windows) into the store, then rename
 * both to *.imported.  Idempotent: a window's key is (name, end, host)
 * and its written_us the line's own time, so an import stopped half-way
 * (the collector killed) is run again whole at the next start and
 * leaves the same rows.  A file that cannot be imported stays (warned).
 */
static void import_history(struct standing *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		size_t nl = strlen(e->d_name), lines = 0;
		char name[STANDING_NAME_MAX + 1], path[4200], path1[4300], to[4400];
		char err[512] = "";
		int ret;

		if (nl <= 7 || nl - 7 > STANDING_NAME_MAX || strcmp(e->d_name + nl - 7, ".ndjson"))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(nl - 7), e->d_name);
		if (!standing_name_ok(name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name);
		snprintf(path1, sizeof(path1), "%s.1", path);
		ret = import_file(s, name, path1, &lines, err, sizeof(err));
		if (!ret)
			ret = import_file(s, name, path, &lines, err, sizeof(err));
		if (ret) {
			pr_warn("standing query %s: importing %s: %s (tried again at the next"
				" start)", name, path, err[0] ? err : strerror(-ret));
			continue;
		}
		snprintf(to, sizeof(to), "%s.imported", path1);
		if (!access(path1, F_OK) && rename(path1, to))
			pr_warn("standing query %s: %s: %s", name, path1, strerror(errno));
		snprintf(to, sizeof(to), "%s.imported", path);
		if (rename(path, to))
			pr_warn("standing query %s: %s: %s", name, path, strerror(errno));
		pr_info("standing query %s: imported %zu windows of %s into the store", name,
			lines, path);
	}
	if (d)
		closedir(d);
}

/* ---- definitions in a shared store ------------------------------------------- */

/* The store's live definitions, as store__standing_list() gives them. */
struct defs {
	struct store_standing d[STANDING_MAX];
	size_t n;
	bool all;			/* every name, dropped ones too */
};

static int def_add(void *ctx, const struct store_standing *d)
{
	struct defs *v = ctx;

	if ((d->deleted && !v->all) || !standing_name_ok(d->name))
		return 0;
	if (v->n == STANDING_MAX) {
		pr_warn("standing query %s: this collector runs its maximum of %d; not run",
			d->name, STANDING_MAX);
		return 0;
	}
	v->d[v->n] = *d;
	v->d[v->n].name = strdup(d->name);
	v->d[v->n].query = strdup(d->query);
	if (!v->d[v->n].name || !v->d[v->n].query) {
		free((char *)v->d[v->n].name);
		free((char *)v->d[v->n].query);
		return -ENOMEM;
	}
	v->n++;
	return 0;
}

static void defs_free(struct defs *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free((char *)v->d[i].name);
		free((char *)v->d[i].query);
	}
	v->n = 0;
}

static const struct store_standing *defs_find(const struct defs *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->d[i].name, name))
			return &v->d[i];
	return NULL;
}

/* ---- collectors side by side on a shared store ---------------------------- */

/* This collector's agents' hosts, as a JSON array text (malloc'd; NULL:
 * no memory): its connected peers that are not collectors. */
static char *own_hosts(struct standing *s)
{
	char *pj = cluster_peers_json(s->cl), *out;
	json_t *peers = pj ? json_loads(pj, 0, NULL) : NULL, *a = json_array(), *p;
	size_t i;

	free(pj);
	json_array_foreach(peers, i, p) {
		if (!json_is_true(json_object_get(p, "collector")) &&
		    json_is_string(json_object_get(p, "host")))
			json_array_append(a, json_object_get(p, "host"));
	}
	out = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(peers);
	json_decref(a);
	return out;
}

/* The other collectors' rows, as store__collectors() gives them. */
struct peer_rows {
	struct standing *s;
	uint64_t now_us;
	struct cluster_flat *v;		/* names and hosts owned by the arrays */
	json_t **hosts;			/* each one's hosts (parsed) */
	size_t n, cap;
	char holder_addr[256];		/* the row whose run is s->who */
};

static int peer_row(void *ctx, const struct store_collector *c)
{
	struct peer_rows *r = ctx;
	json_t *h;
	const char **names;
	size_t i;

	if (!strcmp(c->run, r->s->who) && !c->gone && strcmp(c->id, r->s->addr))
		snprintf(r->holder_addr, sizeof(r->holder_addr), "%s", c->id);
	if (!strcmp(c->id, r->s->addr) || c->gone ||
	    c->beat_us + STANDING_FORGET_MS * 1000ull < r->now_us)
		return 0;
	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 8;
		struct cluster_flat *nv = realloc(r->v, nc * sizeof(*nv));
		json_t **nh;

		if (!nv)
			return -ENOMEM;
		r->v = nv;
		nh = realloc(r->hosts, nc * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		r->hosts = nh;
		r->cap = nc;
	}
	h = json_loads(c->hosts, 0, NULL);
	names = calloc(json_array_size(h) + 1, sizeof(*names));
	if (!names || !(r->v[r->n].name = strdup(c->id))) {
		free(names);
		json_decref(h);
		return -ENOMEM;
	}
	r->v[r->n].hosts = names;
	r->v[r->n].nhosts = 0;
	for (i = 0; i < json_array_size(h); i++)
		if (json_is_string(json_array_get(h, i)))
			names[r->v[r->n].nhosts++] = json_string_value(json_array_get(h, i));
	r->hosts[r->n++] = h;
	return 0;
}

static void peer_rows_free(struct peer_rows *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free((char *)r->v[i].name);
		free((void *)r->v[i].hosts);
		json_decref(r->hosts[i]);
	}
	free(r->v);
	free(r->hosts);
}

/*
 * Beat in the store's collectors table, read the others (the holder
 * counts them: cluster_set_flat()), and link to the lease's holder when
 * another holds it (stopping a link to one that no longer does).  On
 * the sync thread, s->holder and s->who just read; not under s->lock.
 */
static void sync_peers(struct standing *s)
{
	char *hosts = own_hosts(s), err[512] = "";
	struct peer_rows r = { .s = s, .now_us = clock_realtime_ns() / 1000 };
	struct store_collector me = {
		.id = s->addr, .run = s->me, .hosts = hosts ? hosts : "[]", .beat_us = r.now_us,
	};
	int ret = store__collector_beat(s->st, &me, err, sizeof(err));

	free(hosts);
	if (ret)
		pr_warn("standing queries: beating in the store's collectors: %s",
			err[0] ? err : strerror(-ret));
	err[0] = '\0';
	ret = store__collectors(s->st, peer_row, &r, err, sizeof(err));
	if (ret) {
		pr_warn("standing queries: reading the store's collectors: %s",
			err[0] ? err : strerror(-ret));
	} else if (cluster_set_flat(s->cl, r.v, r.n)) {
		pr_warn("standing queries: the collectors beside this one: out of memory");
	}
	if (s->holder || ret)
		r.holder_addr[0] = '\0';
	if (strcmp(r.holder_addr, s->link_addr) && (!ret || s->holder)) {
		if (s->link)
			pr_info("standing queries: link to %s closed", s->link_addr);
		ctree_stop(s->link);
		s->link = NULL;
		snprintf(s->link_addr, sizeof(s->link_addr), "%s", r.holder_addr);
		if (s->link_addr[0]) {
			s->link = ctree_start(s->cl, s->link_addr, s->addr, s->net.token,
					      s->net.tls, true);
			if (s->link)
				pr_info("standing queries: linked to %s, which runs them",
					s->link_addr);
			else
				pr_warn("standing queries: cannot link to %s: %s", s->link_addr,
					strerror(errno));
			if (!s->link)
				s->link_addr[0] = '\0';
		}
	}
	peer_rows_free(&r);
}

/*
 * Bring this collector's list to the store's definitions and its
 * running queries to the lease: take or renew it, read the definitions,
 * forget those dropped or changed, compile the new ones, and run all of
 * them on the lease's holder only.  A store that does not answer
 * changes nothing (warned).
 */
static void sync_shared(struct standing *s)
{
	struct defs *v = calloc(1, sizeof(*v));
	struct sq *gone = NULL, *halt[STANDING_MAX], **pp, *q;
	size_t nhalt = 0;
	char err[512] = "", who[128] = "";
	int held, ret;

	if (!v)
		return;
	pthread_mutex_lock(&s->sync_lock);
	held = s->may_run ? store__standing_lease(s->st, s->me, STANDING_LEASE_MS * 1000ull,
						  false, who, sizeof(who), err, sizeof(err)) : 0;
	if (held < 0)
		pr_warn("standing queries: the store's lease: %s",
			err[0] ? err : strerror(-held));
	else
		pr_debug("standing queries: lease %s (holder %s)", held ? "held" : "not held",
			 who);
	err[0] = '\0';
	ret = store__standing_list(s->st, def_add, v, err, sizeof(err));
	if (ret) {
		pr_warn("standing queries: reading the store's definitions: %s",
			err[0] ? err : strerror(-ret));
		defs_free(v);
		free(v);
		pthread_mutex_unlock(&s->sync_lock);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (held >= 0) {
		if ((bool)held != s->holder)
			pr_info("standing queries: %s (lease holder: %s)", held ?
				"this collector runs them" : "another collector runs them",
				who[0] ? who : "none");
		s->holder = held;
		snprintf(s->who, sizeof(s->who), "%s", who);
	}
	for (pp = &s->list; (q = *pp);) {
		const struct store_standing *d = defs_find(v, q->name);

		if (d && !strcmp(d->query, q->text) &&
		    d->grace_ms == q->grace_ns / 1000000) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;		/* dropped (or changed: made again below) */
		s->n--;
		q->next = gone;
		gone = q;
		pr_info("standing query %s: dropped%s", q->name, d ? " (changed)" : "");
	}
	for (size_t i = 0; i < v->n; i++) {
		const struct store_standing *d = &v->d[i];
		char why[2048];

		for (q = s->list; q && strcmp(q->name, d->name); q = q->next)
			;
		if (q)
			continue;
		q = sq_new(s, d->name, d->query, d->grace_ms * 1000000ull, d->created_ms,
			   why, sizeof(why), NULL, NULL);
		if (!q) {
			pr_debug("standing query %s: %s", d->name, why);
			continue;
		}
		q->next = s->list;
		s->list = q;
		s->n++;
		pr_info("standing query %s: defined in the store: %s", d->name, d->query);
	}
	for (q = s->list; q; q = q->next) {
		if (s->holder && !q->running)
			sq_run(q);
		else if (!s->holder && q->running)
			halt[nhalt++] = q;
		if (!s->holder && q->running)
			q->stop = 1;
	}
	pthread_mutex_unlock(&s->lock);
	/* threads joined outside the lock: their sinks take it */
	for (size_t i = 0; i < nhalt; i++)
		sq_halt(halt[i]);
	while ((q = gone)) {
		gone = q->next;
		sq_stop(q);
	}
	if (s->may_run)
		sync_peers(s);
	pthread_mutex_unlock(&s->sync_lock);
	defs_free(v);
	free(v);
}

static void *sync_main(void *arg)
{
	struct standing *s = arg;

	while (!s->stop) {
		for (int w = 0; w < STANDING_SYNC_MS && !s->stop; w += 50)
			poll(NULL, 0, 50);
		if (!s->stop)
			sync_shared(s);
	}
	return NULL;
}

/*
 * Definitions of DIR/queries.json (kept before the store shared them)
 * into the store, those whose name it never had, then the file renamed
 * queries.json.imported.  A file that cannot be read stays (warned).
 */
static void import_defs(struct standing *s)
{
	struct defs *v = calloc(1, sizeof(*v));
	char path[4200], to[4300], err[512] = "";
	json_t *j, *e;
	size_t i, n = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/queries.json", s->dir);
	if (!v || access(path, F_OK)) {
		free(v);
		return;
	}
	v->all = true;
	j = json_load_file(path, 0, NULL);
	ret = j ? store__standing_list(s->st, def_add, v, err, sizeof(err)) : -EBADMSG;
	json_array_foreach(ret ? NULL : json_object_get(j, "queries"), i, e) {
		struct store_standing d = {
			.name = json_string_value(json_object_get(e, "name")),
			.query = json_string_value(json_object_get(e, "query")),
			.grace_ms = (uint64_t)json_integer_value(json_object_get(e, "grace_ms")),
			.created_ms = (uint64_t)json_integer_value(json_object_get(e, "created_ms")),
		};

		if (!d.name || !d.query || !standing_name_ok(d.name) || defs_find(v, d.name))
			continue;
		ret = store__standing_put(s->st, &d, err, sizeof(err));
		if (ret)
			break;
		n++;
	}
	json_decref(j);
	defs_free(v);
	free(v);
	snprintf(to, sizeof(to), "%s.imported", path);
	if (ret)
		pr_warn("standing queries: %s into the store: %s (tried again at the next start)",
			path, err[0] ? err : strerror(-ret));
	else if (rename(path, to))
		pr_warn("standing queries: %s: %s", path, strerror(errno));
	else
		pr_info("standing queries: %zu definitions of %s now in the store", n, path);
}

/* Shared: write d (a definition, or a drop) and sync at once.  0 or
 * -errno with a reason in err. */
static int put_shared(struct standing *s, const struct store_standing *d, char *err,
		      size_t errlen)
{
	int ret = store__standing_put(s->st, d, err, errlen);

	if (ret && !err[0])
		snprintf(err, errlen, "the store: %s", strerror(-ret));
	if (!ret)
		sync_shared(s);
	return ret;
}

/* ---- the registry ------------------------------------------------------------ */

static int load(struct standing *s, char *err, size_t errlen)
{
	char path[4200];
	json_error_t je;
	json_t *j, *a, *e;
	size_t i;

	snprintf(path, sizeof(path), "%s/queries.json", s->dir);
	j = json_load_file(path, 0, &je);
	if (!j) {
		if (access(path, F_OK))
			return 0;	/* none yet */
		snprintf(err, errlen, "%s: line %d: %s (fix or remove it)", path, je.line, je.text);
		return -EBADMSG;
	}
	a = json_object_get(j, "queries");
	json_array_foreach(a, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		const char *t = json_string_value(json_object_get(e, "query"));
		char why[2048];
		struct sq *q;

		if (!n || !t || !standing_name_ok(n)) {
			pr_warn("%s: entry %zu is not a standing query; skipped", path, i + 1);
			continue;
		}
		q = sq_start(s, n, t,
			     (uint64_t)json_integer_value(json_object_get(e, "grace_ms")) * 1000000ull,
			     (uint64_t)json_integer_value(json_object_get(e, "created_ms")),
			     why, sizeof(why), NULL, NULL);
		if (!q) {
			pr_warn("standing query %s: %s", n, why);
			continue;
		}
		q->next = s->list;
		s->list = q;
		s->n++;
		pr_info("standing query %s: running again", n);
	}
	json_decref(j);
	return 0;
}

struct standing *standing_new(struct cluster *cl, struct store *st, const char *dir,
			      const struct standing_net *net, char *err, size_t errlen)
{
	struct standing *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cl = cl;
	s->st = st;
	s->may_run = net != NULL;
	if (net) {
		s->net = *net;
		snprintf(s->addr, sizeof(s->addr), "%s", net->advertise);
	}
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->sync_lock, NULL);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		standing_free(s);
		return NULL;
	}
	import_history(s);
	s->shared = store__standing_shared(st);
	if (s->shared) {
		char host[64] = "";

		gethostname(host, sizeof(host) - 1);
		snprintf(s->me, sizeof(s->me), "%.63s:%d:%016" PRIx64, host, (int)getpid(),
			 clock_realtime_ns() ^ ((uint64_t)getpid() << 40));
		import_defs(s);
		sync_shared(s);
		if (pthread_create(&s->sync_thread, NULL, sync_main, s)) {
			snprintf(err, errlen, "cannot start a thread");
			standing_free(s);
			return NULL;
		}
		s->sync_started = true;
		return s;
	}
	if (load(s, err, errlen)) {
		standing_free(s);
		return NULL;
	}
	return s;
}

void standing_free(struct standing *s)
{
	if (!s)
		return;
	s->stop = 1;
	if (s->sync_started)
		pthread_join(s->sync_thread, NULL);
	ctree_stop(s->link);	/* the holder's queries here first */
	if (s->shared && s->may_run) {	/* the others no longer count it */
		struct store_collector me = { .id = s->addr, .run = s->me, .hosts = "[]",
			.beat_us = clock_realtime_ns() / 1000, .gone = 1 };
		char err[512] = "";

		if (store__collector_beat(s->st, &me, err, sizeof(err)))
			pr_warn("standing queries: leaving the store's collectors: %s", err);
	}
	while (s->list) {
		struct sq *q = s->list;

		s->list = q->next;
		sq_stop(q);
	}
	if (s->shared && s->holder) {	/* another takes over now */
		char err[512] = "";

		if (store__standing_lease(s->st, s->me, 0, true, NULL, 0, err, sizeof(err)) < 0)
			pr_warn("standing queries: giving the lease back: %s", err);
		else
			pr_info("standing queries: the lease given back (another collector"
				" takes it at its next sync)");
	}
	pthread_mutex_destroy(&s->sync_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int standing_add(struct standing *s, const char *name, const char *text, uint64_t grace_ns,
		 char *err, size_t errlen, int *line, int *col)
{
	struct sq *q;
	int ret;

	*line = *col = 0;
	if (!standing_name_ok(name)) {
		snprintf(err, errlen, "name: 1 to %d letters, digits or '_' (it becomes the metric fay_query_NAME)",
			 STANDING_NAME_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	for (q = s->list; q; q = q->next)
		if (!strcmp(q->name, name))
			break;
	ret = q ? -EEXIST : s->n >= STANDING_MAX ? -ENOSPC : 0;
	pthread_mutex_unlock(&s->lock);
	if (ret == -EEXIST)
		snprintf(err, errlen, "a standing query named %s exists (drop it first)", name);
	else if (ret)
		snprintf(err, errlen, "this collector runs its maximum of %d standing queries",
			 STANDING_MAX);
	if (ret)
		return ret;
	if (s->shared) {	/* checked here, run by the lease's holder */
		struct store_standing d = { .name = name, .query = text,
			.grace_ms = grace_ns / 1000000,
			.created_ms = clock_realtime_ns() / 1000000 };

		q = sq_new(s, name, text, grace_ns, d.created_ms, err, errlen, line, col);
		if (!q)
			return -EINVAL;
		sq_free(q);
		ret = put_shared(s, &d, err, errlen);
		if (!ret)
			pr_info("standing query %s: %s (in the store)", name, text);
		return ret;
	}
	q = sq_start(s, name, text, grace_ns, clock_realtime_ns() / 1000000, err, errlen, line, col);
	if (!q)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	q->next = s->list;
	s->list = q;
	s->n++;
	ret = save(s);
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		snprintf(err, errlen, "%s/queries.json: %s", s->dir, strerror(-ret));
		standing_drop(s, name);
		return ret;
	}
	pr_info("standing query %s: %s", name, text);
	return 0;
}

char *standing_text(struct standing *s, const char *name)
{
	char *t = NULL;

	errno = ENOENT;
	pthread_mutex_lock(&s->lock);
	for (struct sq *q = s->list; q; q = q->next)
		if (!strcmp(q->name, name)) {
			t = strdup(q->text);
			break;
		}
	pthread_mutex_unlock(&s->lock);
	return t;
}

int standing_drop(struct standing *s, const char *name)
{
	struct sq **pp, *q = NULL;

	if (s->shared) {	/* a drop in the store, then everyone forgets it */
		struct store_standing d = { .name = name, .query = "", .deleted = 1 };
		char err[512] = "";
		bool known = false;

		pthread_mutex_lock(&s->lock);
		for (q = s->list; q && !known; q = q->next)
			known = !strcmp(q->name, name);
		pthread_mutex_unlock(&s->lock);
		if (!known)
			return -ENOENT;
		if (put_shared(s, &d, err, sizeof(err))) {
			pr_warn("standing query %s: dropping it in the store: %s", name, err);
			return -EIO;
		}
		return 0;
	}

	pthread_mutex_lock(&s->lock);
	for (pp = &s->list; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name)) {
			q = *pp;
			*pp = q->next;
			s->n--;
			break;
		}
	if (q && save(s))
		pr_warn("standing query %s: cannot rewrite %s/queries.json", name, s->dir);
	pthread_mutex_unlock(&s->lock);
	if (!q)
		return -ENOENT;
	sq_stop(q);		/* its agents detach the probes */
	pr_info("standing query %s: dropped", name);
	return 0;
}

/* A key column that is a profile sample's s.trace_id (the trace page's
 * profile of a request), or -1. */
static int trace_col(const struct plan *p)
{
	for (int i = 0; p && i < p->ncols; i++) {
		const struct pexpr *e = p->cols[i].e;
		const struct pexpr *k = e && e->op == PX_KEY ? p->keys[e->idx].e : NULL;

		if (p->source == SRC_PROFILE && k && k->op == PX_FIELD && k->field == F_TRACE_ID)
			return i;
	}
	return -1;
}

json_t *plan_columns_json(const struct plan *p)
{
	json_t *a = json_array();

	for (int i = 0; a && i < p->ncols; i++) {
		const struct plan_col *pc = &p->cols[i];
		const char *unit = plan_col_unit(p, i);

		json_t *c = json_pack("{s:s, s:s, s:b, s:s*}", "name", pc->name,
			"type", pc->type == VT_STR ? "string" :
				pc->type == VT_DIST ? "distribution" : "int",
			"key", pc->e && pc->e->op == PX_KEY, "unit", unit);

		/* folded frames, root first (the UI's flame graph) */
		if (c && pc->stack_key >= 0)
			json_object_set_new(c, "stack", json_true());
		/* a profile sample's trace id (the trace page's profile) */
		if (c && trace_col(p) == i)
			json_object_set_new(c, "trace", json_true());
		json_array_append_new(a, c);
	}
	return a;
}

char *standing_list_json(struct standing *s)
{
	json_t *a = json_array();
	char *out;

	pthread_mutex_lock(&s->lock);
	for (struct sq *q = s->list; a && q; q = q->next)
		json_array_append_new(a, json_pack("{s:s, s:s, s:o?, s:I, s:I, s:I, s:O?, s:b}", "name", q->name,
			"query", q->text, "columns", plan_columns_json(q->p), "grace_ms", (json_int_t)(q->grace_ns / 1000000),
			"created_ms", (json_int_t)q->created_ms, "windows", (json_int_t)q->windows,
			"last", q->last, "runs", q->running));
	pthread_mutex_unlock(&s->lock);
	out = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return out;
}

struct windows_out {
	json_t *a;
	int col;		/* keep only rows whose column col is trace; -1: all */
	json_int_t trace;
};

/* store__windows()'s callback: each window's answer into the array. */
static int add_window(void *ctx, const struct store_window *w)
{
	struct windows_out *o = ctx;
	json_t *j = json_loads(w->answer, 0, NULL), *rows = json_object_get(j, "rows"), *kept, *r;
	size_t i;

	if (j && o->col >= 0 && json_is_array(rows) && (kept = json_array())) {
		json_array_foreach(rows, i, r) {
			json_t *v = json_array_get(r, (size_t)o->col);

			if (json_is_integer(v) && json_integer_value(v) == o->trace)
				json_array_append(kept, r);
		}
		json_object_set_new(j, "rows", kept);
	}
	if (j)
		json_array_append_new(o->a, j);
	return 0;
}

int standing_results(struct standing *s, const char *name, unsigned limit,
		     const uint64_t *trace, char **json)
{
	struct windows_out wo = { .col = -1 };
	json_t *a, *o;
	const char *text = NULL;
	const struct plan *p = NULL;
	struct store_reader *r;
	char err[512] = "";
	int ret;

	pthread_mutex_lock(&s->lock);
	for (struct sq *q = s->list; q; q = q->next)
		if (!strcmp(q->name, name)) {
			text = q->text;
			p = q->p;
			wo.col = trace ? trace_col(p) : -1;
		}
	o = text ? json_pack("{s:s, s:s, s:o?}", "name", name, "query", text,
			     "columns", plan_columns_json(p)) : NULL;
	pthread_mutex_unlock(&s->lock);
	if (!text)
		return -ENOENT;
	if (trace && wo.col < 0) {
		json_decref(o);
		return -EINVAL;
	}
	wo.trace = trace ? (json_int_t)*trace : 0;
	a = wo.a = json_array();
	r = store__reader_new(s->st);
	ret = !a || !o ? -ENOMEM : !r ? -errno :
	      store__windows(r, name, STORE_WINDOW_MERGED, limit, add_window, &wo, err, sizeof(err));
	store__reader_free(r);
	if (ret) {
		pr_warn("standing query %s: reading its windows: %s", name,
			err[0] ? err : strerror(-ret));
		json_decref(a);
		json_decref(o);
		return ret;
	}
	json_object_set_new(o, "windows", a);
	*json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return *json ? 0 : -ENOMEM;
}

/* A Prometheus label value, quoted. */
static void label_value(FILE *f, const char *s)
{
	fputc('"', f);
	prom_label(f, s);
	fputc('"', f);
}

/* A label name from a column name: [a-zA-Z0-9_], not starting with a digit. */
static void label_name(FILE *f, const char *s)
{
	if (*s >= '0' && *s <= '9')
		fputc('_', f);
	for (; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') ? *s : '_', f);
}

static void metrics_of(const struct sq *q, FILE *f)
{
	const struct plan *p = q->p;
	json_t *rows = json_object_get(q->last, "rows"), *row;
	size_t r;
	char fam[sizeof("fay_query_") + STANDING_NAME_MAX];
	char help[sizeof("standing query : its latest window") + STANDING_NAME_MAX];

	snprintf(fam, sizeof(fam), "fay_query_%s", q->name);
	snprintf(help, sizeof(help), "standing query %s: its latest window", q->name);
	prom_family(f, fam, "gauge", help);
	json_array_foreach(rows, r, row) {
		for (int c = 0; c < p->ncols; c++) {
			const struct plan_col *pc = &p->cols[c];
			json_t *v = json_array_get(row, (size_t)c);
			bool first = true;

			if (pc->type != VT_INT || (pc->e && pc->e->op == PX_KEY) || !json_is_integer(v))
				continue;
			fprintf(f, "fay_query_%s{", q->name);
			for (int k = 0; k < p->ncols; k++) {
				const struct plan_col *pk = &p->cols[k];
				json_t *kv = json_array_get(row, (size_t)k);
				char num[32];

				if (!(pk->type == VT_STR || (pk->e && pk->e->op == PX_KEY)))
					continue;
				fputs(first ? "" : ",", f);
				label_name(f, pk->name);
				fputc('=', f);
				first = false;
				if (json_is_string(kv)) {
					label_value(f, json_string_value(kv));
				} else {
					snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
						 json_integer_value(kv));
					label_value(f, num);
				}
			}
			fprintf(f, "%scolumn=", first ? "" : ",");
			label_value(f, pc->name);
			fprintf(f, "} %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		}
	}
}

void standing_metrics(struct standing *s, FILE *f)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (struct sq *q = s->list; q; q = q->next)
		if (q->last)
			metrics_of(q, f);
	pthread_mutex_unlock(&s->lock);
}
