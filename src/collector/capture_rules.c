// SPDX-License-Identifier: MIT
/*
 * Capture rules (capture_rules.h): each rule's streaming cluster query
 * runs on a thread of its own (cluster_query_run(), retried while no
 * agent can run it); its rows become pending captures, which one capture
 * thread makes when they are due (capture_make()).  One mutex guards the
 * rules' counts, the pending list and the recent trace ids.
 *
 * The counts are kept in rules.json with the definitions: written by the
 * capture thread at most once a CR_SAVE_MS while they change, and when
 * the collector stops, so that a restart goes on from them (a collector
 * killed -9 loses the last CR_SAVE_MS at most).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "collector/capture_rules.h"
#include "collector/http_int.h"
#include "common/clock.h"
#include "common/file_atomic.h"
#include "common/log.h"
#include "common/prom.h"
#include "engine/driver.h"

#define CR_RETRY_MS	2000
#define CR_SAVE_MS	1000
#define CR_SOURCE	"rule"
/* The query around a rule's predicate: the predicate alone on line 2,
 * so that its errors' columns are the rule's own. */
#define CR_HEAD		"from sp in spans where\n"
#define CR_TAIL		"\nselect { hi: sp.trace_id_hi, lo: sp.trace_id, " \
			"end_ns: sp.time + sp.duration, span: sp.name }"
#define CR_NCOLS	4

struct crule {
	struct crules *rs;
	char name[CRULES_NAME_MAX + 1];
	char *expr, *text;
	unsigned per_s, settle_ms, follow_ms;
	/* --with-query: a standing query in keep mode whose events of the
	 * last with_last_ms on the trace's hosts are captured with it ("":
	 * none) */
	char with_query[STANDING_NAME_MAX + 1];
	unsigned with_last_ms;
	uint64_t created_ms;
	struct query *q;
	const struct plan *p;
	volatile int stop;
	pthread_t thread;
	/* under rs->lock */
	uint64_t matches, captures, deduped, over_budget, late, unfollowed;
	double tokens;
	uint64_t tokens_ns;
	int running;
	struct crule *next;
};

struct cpend {
	struct cpend *next;
	uint64_t hi, lo, due_ns, matched_ns, span_end_ns;
	unsigned follow_ms;
	char with_query[STANDING_NAME_MAX + 1];
	unsigned with_last_ms;
	char rule[CRULES_NAME_MAX + 1];
	char host[WIRE_HOST_MAX + 1];
	char span[QUERY_STR_MAX + 1];
};

/* A capture following its trace: rounds at 250 ms, 500 ms, 1 s, 2 s ...
 * after it, the last at follow_ms. */
struct cfollow {
	struct cfollow *next;
	uint64_t hi, lo, start_ns, due_ns, end_ns;	/* monotonic */
	unsigned round;
	json_t *acc;			/* its account (a reference) */
	struct capture_seen seen;	/* the records it stored */
	char rule[CRULES_NAME_MAX + 1];
};

struct crules {
	struct collector *c;
	char dir[4096];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct crule *list;
	unsigned n;
	struct cpend *pend;		/* in due order (sorted on insert: rules
					 * have settle times of their own) */
	unsigned npend;
	uint64_t recent[CRULES_RECENT][2];	/* trace ids pending or captured */
	unsigned nrecent, recent_at;
	struct cfollow *follow;		/* in due order */
	unsigned nfollow;
	pthread_cond_t fcond;
	bool dirty;			/* counts changed since the last save */
	uint64_t saved_ns;		/* monotonic */
	int stop;
	pthread_t thread, fthread;
};

/* ---- definitions on disk ------------------------------------------------- */

/* A rule's counts, as rules.json and /api/captures/rules name them. */
static const struct {
	const char *key;
	size_t off;
} cr_counts[] = {
	{ "matches", offsetof(struct crule, matches) },
	{ "captures", offsetof(struct crule, captures) },
	{ "deduplicated", offsetof(struct crule, deduped) },
	{ "over_budget", offsetof(struct crule, over_budget) },
	{ "spans_late", offsetof(struct crule, late) },
	{ "unfollowed", offsetof(struct crule, unfollowed) },
};
#define CR_NCOUNTS	(sizeof(cr_counts) / sizeof(cr_counts[0]))

static uint64_t *count_of(struct crule *r, size_t i)
{
	return (uint64_t *)((char *)r + cr_counts[i].off);
}

/* r's counts as a JSON object (NULL: out of memory). */
static json_t *counts_json(struct crule *r)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < CR_NCOUNTS; i++)
		json_object_set_new(o, cr_counts[i].key, json_integer((json_int_t)*count_of(r, i)));
	return o;
}

/* r's --with-query, added to its object o (nothing without one). */
static void with_json(const struct crule *r, json_t *o)
{
	if (!o || !r->with_query[0])
		return;
	json_object_set_new(o, "with_query", json_string(r->with_query));
	json_object_set_new(o, "with_last_ms", json_integer(r->with_last_ms));
}

/* Write rules.json whole: definitions and counts.  Under rs->lock. */
static int save(struct crules *rs)
{
	json_t *a = json_array(), *doc;
	char path[4200], *text;
	int err;

	for (struct crule *r = rs->list; a && r; r = r->next) {
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:I, s:o*}", "name",
			r->name, "expr", r->expr, "per_s", (int)r->per_s, "settle_ms",
			(int)r->settle_ms, "follow_ms", (int)r->follow_ms, "created_ms",
			(json_int_t)r->created_ms, "counts", counts_json(r));

		with_json(r, o);
		json_array_append_new(a, o);
	}
	doc = a ? json_pack("{s:o}", "rules", a) : NULL;
	text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
	json_decref(doc);
	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/rules.json", rs->dir);
	err = file_write_atomic(path, text, strlen(text), 0600, 0);
	free(text);
	if (!err) {
		rs->dirty = false;
		rs->saved_ns = clock_monotonic_ns();
	}
	return err;
}

/* Save the counts when they changed, CR_SAVE_MS after the last save at
 * the soonest (force: now).  Under rs->lock. */
static void save_counts(struct crules *rs, bool force)
{
	int err;

	if (!rs->dirty || (!force && clock_monotonic_ns() - rs->saved_ns <
			   (uint64_t)CR_SAVE_MS * 1000000u))
		return;
	err = save(rs);
	if (err) {
		rs->saved_ns = clock_monotonic_ns();	/* warn once a CR_SAVE_MS */
		pr_warn("capture rules: their counts not saved in %s/rules.json: %s", rs->dir,
			strerror(-err));
	}
}

/* ---- matches ----------------------------------------------------------- */

/* Is trace (hi, lo) pending or captured lately?  Under rs->lock. */
static bool recent_has(const struct crules *rs, uint64_t hi, uint64_t lo)
{
	for (unsigned i = 0; i < rs->nrecent; i++)
		if (rs->recent[i][0] == hi && rs->recent[i][1] == lo)
			return true;
	return false;
}

static void recent_add(struct crules *rs, uint64_t hi, uint64_t lo)
{
	rs->recent[rs->recent_at][0] = hi;
	rs->recent[rs->recent_at][1] = lo;
	rs->recent_at = (rs->recent_at + 1) % CRULES_RECENT;
	if (rs->nrecent < CRULES_RECENT)
		rs->nrecent++;
}

/* Take a token of r's budget.  Under rs->lock. */
static bool budget_take(struct crule *r, uint64_t now)
{
	r->tokens += (double)(now - r->tokens_ns) * r->per_s / 1e9;
	if (r->tokens > r->per_s)
		r->tokens = r->per_s;
	r->tokens_ns = now;
	if (r->tokens < 1)
		return false;
	r->tokens -= 1;
	return true;
}

/* A row of r's query: {"type":"row","host":H,"values":[hi,lo,end_ns,span]}. */
static void on_row(struct crule *r, json_t *j)
{
	struct crules *rs = r->rs;
	json_t *v = json_object_get(j, "values");
	const char *host = json_string_value(json_object_get(j, "host"));
	const char *span = json_string_value(json_array_get(v, 3));
	uint64_t hi = (uint64_t)json_integer_value(json_array_get(v, 0));
	uint64_t lo = (uint64_t)json_integer_value(json_array_get(v, 1));
	uint64_t now = clock_monotonic_ns();
	struct cpend *pd, **pp;

	if (json_array_size(v) != CR_NCOLS || (!hi && !lo))
		return;
	pthread_mutex_lock(&rs->lock);
	r->matches++;
	rs->dirty = true;
	if (recent_has(rs, hi, lo)) {
		r->deduped++;
		goto out;
	}
	if (rs->npend >= CRULES_PENDING || !budget_take(r, now) ||
	    !(pd = calloc(1, sizeof(*pd)))) {
		r->over_budget++;
		goto out;
	}
	recent_add(rs, hi, lo);
	pd->hi = hi;
	pd->lo = lo;
	pd->due_ns = now + (uint64_t)r->settle_ms * 1000000u;
	pd->matched_ns = clock_realtime_ns();
	pd->span_end_ns = (uint64_t)json_integer_value(json_array_get(v, 2));
	pd->follow_ms = r->follow_ms;
	snprintf(pd->with_query, sizeof(pd->with_query), "%s", r->with_query);
	pd->with_last_ms = r->with_last_ms;
	snprintf(pd->rule, sizeof(pd->rule), "%s", r->name);
	snprintf(pd->host, sizeof(pd->host), "%s", host ? host : "");
	snprintf(pd->span, sizeof(pd->span), "%s", span ? span : "");
	for (pp = &rs->pend; *pp && (*pp)->due_ns <= pd->due_ns; pp = &(*pp)->next)
		;
	pd->next = *pp;
	*pp = pd;
	rs->npend++;
	pthread_cond_broadcast(&rs->cond);
out:
	pthread_mutex_unlock(&rs->lock);
}

static int on_line(void *ctx, const char *json, size_t len)
{
	struct crule *r = ctx;
	json_t *j = json_loadb(json, len, 0, NULL), *t = json_object_get(j, "type");

	if (json_is_string(t) && !strcmp(json_string_value(t), "row"))
		on_row(r, j);
	json_decref(j);
	return r->stop ? -EPIPE : 0;
}

static void set_running(struct crule *r, int running)
{
	pthread_mutex_lock(&r->rs->lock);
	r->running = running;
	pthread_mutex_unlock(&r->rs->lock);
}

/* A rule's thread: its query on every agent, again while none can. */
static void *rule_main(void *arg)
{
	struct crule *r = arg;
	struct cluster_qopts o = { .all = true };
	struct qengine_env env = { .emit = on_line, .ctx = r, .stop = &r->stop };

	while (!r->stop) {
		char err[2048] = "";
		int ret;

		set_running(r, 1);
		ret = cluster_query_run(r->rs->c->cluster, r->q, r->p, r->text, &o, &env,
					err, sizeof(err));
		set_running(r, 0);
		if (r->stop)
			break;
		if (ret)
			pr_debug("capture rule %s: %s; trying again", r->name,
				 err[0] ? err : strerror(-ret));
		for (int w = 0; w < CR_RETRY_MS && !r->stop; w += 50)
			poll(NULL, 0, 50);
	}
	return NULL;
}

/* ---- the capture thread and the follow thread ----------------------- */

/* Wait on cond until due_ns (monotonic; 0: none), 200 ms at most.
 * Under rs->lock. */
static void wait_due(struct crules *rs, pthread_cond_t *cond, uint64_t due_ns)
{
	uint64_t now = clock_monotonic_ns(), wait = due_ns ? due_ns - now : 200000000u, t;
	struct timespec ts;

	if (wait > 200000000u)
		wait = 200000000u;
	t = clock_realtime_ns() + wait;
	ts.tv_sec = (time_t)(t / 1000000000u);
	ts.tv_nsec = (long)(t % 1000000000u);
	pthread_cond_timedwait(cond, &rs->lock, &ts);
}

static struct crule *rule_named(struct crules *rs, const char *name)
{
	for (struct crule *r = rs->list; r; r = r->next)
		if (!strcmp(r->name, name))
			return r;
	return NULL;
}

/* Put fo in the follow list, in due order.  Under rs->lock. */
static void follow_insert(struct crules *rs, struct cfollow *fo)
{
	struct cfollow **pp;

	for (pp = &rs->follow; *pp && (*pp)->due_ns <= fo->due_ns; pp = &(*pp)->next)
		;
	fo->next = *pp;
	*pp = fo;
	pthread_cond_broadcast(&rs->fcond);
}

static void follow_free(struct cfollow *fo)
{
	json_decref(fo->acc);
	capture_seen_free(&fo->seen);
	free(fo);
}

/* When round k (0, 1, ...) of fo is due: 250 ms << k after the capture,
 * the follow's end at most. */
static uint64_t follow_due(const struct cfollow *fo, unsigned k)
{
	uint64_t d = k < 20 ? 250000000ull << k : fo->end_ns;

	return fo->start_ns + d < fo->end_ns ? fo->start_ns + d : fo->end_ns;
}

/* pd's rule has --with-query: capture that query's events of the last
 * with_last_ms on the trace's hosts (the matching span's, and those that
 * answered acc's capture with spans), and link the two accounts. */
static void capture_with_query(struct crules *rs, const struct cpend *pd, json_t *acc)
{
	const char *hosts[CRULES_WITH_HOSTS];
	char names[CRULES_WITH_HOSTS][WIRE_HOST_MAX + 1], by[300], err[512];
	uint64_t now = clock_realtime_ns();
	size_t n = 0, i;
	json_t *h, *qacc;
	int status;

	snprintf(names[n], sizeof(names[n]), "%s", pd->host);
	hosts[n] = names[n];
	n++;
	pthread_mutex_lock(&rs->c->captures_lock);
	json_array_foreach(json_object_get(acc, "hosts"), i, h) {
		const char *name = json_string_value(json_object_get(h, "host"));

		if (n == CRULES_WITH_HOSTS || !name || !strcmp(name, pd->host) ||
		    json_integer_value(json_object_get(h, "spans")) <= 0)
			continue;
		snprintf(names[n], sizeof(names[n]), "%s", name);
		hosts[n] = names[n];
		n++;
	}
	pthread_mutex_unlock(&rs->c->captures_lock);
	snprintf(by, sizeof(by), "rule %s: query %s last %ums, trace %016" PRIx64 "%016" PRIx64,
		 pd->rule, pd->with_query, pd->with_last_ms, pd->hi, pd->lo);
	qacc = capture_query_make(rs->c, pd->with_query,
				  now - (uint64_t)pd->with_last_ms * 1000000u, now, hosts, n, by,
				  &status, err, sizeof(err));
	pthread_mutex_lock(&rs->c->captures_lock);
	if (qacc) {
		json_object_set_new(acc, "events_capture", json_string(
			json_string_value(json_object_get(qacc, "id"))));
		json_object_set_new(qacc, "rule", json_string(pd->rule));
		json_object_set_new(qacc, "trace_capture", json_string(
			json_string_value(json_object_get(acc, "id"))));
		caplog_put(rs->c, qacc);
	} else {
		json_object_set_new(acc, "events_error", json_string(err));
		pr_warn("capture rule %s: the events of query %s not captured: %s", pd->rule,
			pd->with_query, err);
	}
	caplog_put(rs->c, acc);
	pthread_mutex_unlock(&rs->c->captures_lock);
	json_decref(qacc);
}

/* Capture pd's trace; follow it when its rule says so. */
static void capture_pending(struct crules *rs, const struct cpend *pd)
{
	struct cluster_capture_req cr = { .kind = WIRE_CK_TRACE, .trace_hi = pd->hi,
					  .trace_lo = pd->lo };
	struct capture_trigger tr = { .rule = pd->rule, .host = pd->host, .span = pd->span,
				      .span_end_ns = pd->span_end_ns,
				      .matched_ns = pd->matched_ns, .follow_ms = pd->follow_ms };
	struct cfollow *fo = pd->follow_ms ? calloc(1, sizeof(*fo)) : NULL;
	char by[300];
	int status;
	json_t *acc;

	snprintf(by, sizeof(by), "rule %s: span %.64s on %.64s, trace %016" PRIx64 "%016" PRIx64,
		 pd->rule, pd->span, pd->host, pd->hi, pd->lo);
	acc = capture_make(rs->c, &cr, by, &tr, fo ? &fo->seen : NULL, &status);
	if (!acc)
		pr_warn("capture rule %s: out of memory for a capture", pd->rule);
	else if (pd->with_query[0])
		capture_with_query(rs, pd, acc);
	pthread_mutex_lock(&rs->lock);
	{
		struct crule *r = rule_named(rs, pd->rule);

		if (r)
			r->captures++;
		rs->dirty = true;
		if (r && pd->follow_ms && (!fo || !acc || rs->nfollow >= CRULES_FOLLOWING))
			r->unfollowed++;
	}
	if (fo && acc && rs->nfollow < CRULES_FOLLOWING) {
		fo->hi = pd->hi;
		fo->lo = pd->lo;
		fo->acc = acc;
		acc = NULL;
		fo->start_ns = clock_monotonic_ns();
		fo->end_ns = fo->start_ns + (uint64_t)pd->follow_ms * 1000000u;
		fo->due_ns = follow_due(fo, 0);
		snprintf(fo->rule, sizeof(fo->rule), "%s", pd->rule);
		rs->nfollow++;
		follow_insert(rs, fo);
		fo = NULL;
	}
	pthread_mutex_unlock(&rs->lock);
	if (fo) {
		if (acc) {	/* not followed after all: say so */
			pthread_mutex_lock(&rs->c->captures_lock);
			json_object_set_new(acc, "following", json_false());
			json_object_set_new(acc, "follow_cut", json_string(
				"too many captures following their traces"));
			pthread_mutex_unlock(&rs->c->captures_lock);
		}
		follow_free(fo);
	}
	json_decref(acc);
}

static void *capture_main(void *arg)
{
	struct crules *rs = arg;

	pthread_mutex_lock(&rs->lock);
	while (!rs->stop) {
		struct cpend *pd = rs->pend;

		save_counts(rs, false);
		if (!pd || pd->due_ns > clock_monotonic_ns()) {
			wait_due(rs, &rs->cond, pd ? pd->due_ns : 0);
			continue;
		}
		rs->pend = pd->next;
		rs->npend--;
		pthread_mutex_unlock(&rs->lock);
		capture_pending(rs, pd);
		free(pd);
		pthread_mutex_lock(&rs->lock);
	}
	pthread_mutex_unlock(&rs->lock);
	return NULL;
}

/* The follow rounds, on a thread of their own: a round of one capture
 * never delays the first round of another. */
static void *follow_main(void *arg)
{
	struct crules *rs = arg;

	pthread_mutex_lock(&rs->lock);
	while (!rs->stop) {
		struct cfollow *fo = rs->follow;
		struct cluster_capture_req cr = { .kind = WIRE_CK_TRACE };
		bool last;
		long n;

		if (!fo || fo->due_ns > clock_monotonic_ns()) {
			wait_due(rs, &rs->fcond, fo ? fo->due_ns : 0);
			continue;
		}
		rs->follow = fo->next;
		pthread_mutex_unlock(&rs->lock);
		cr.trace_hi = fo->hi;
		cr.trace_lo = fo->lo;
		last = fo->due_ns >= fo->end_ns;
		n = capture_follow(rs->c, fo->acc, &cr, &fo->seen, last);
		pthread_mutex_lock(&rs->lock);
		if (n > 0) {
			struct crule *r = rule_named(rs, fo->rule);

			if (r)
				r->late += (uint64_t)n;
			rs->dirty = true;
		}
		if (last) {
			rs->nfollow--;
			follow_free(fo);
			continue;
		}
		fo->due_ns = follow_due(fo, ++fo->round);
		follow_insert(rs, fo);
	}
	pthread_mutex_unlock(&rs->lock);
	return NULL;
}

/* ---- rules ------------------------------------------------------------- */

static void rule_free(struct crule *r)
{
	if (!r)
		return;
	query_free(r->q);
	free(r->expr);
	free(r->text);
	free(r);
}

/* The error of planning r->text, told in the rule's own lines: the
 * predicate is the query's line 2 on (CR_HEAD). */
static void rule_error(const struct crule *r, char *err, size_t errlen, int *line, int *col)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct query *tmp = query_new(CR_SOURCE, r->text, strlen(r->text), &qo);
	const struct plan *p;
	const char *msg, *s = r->expr;
	int l = 0, c = 0, nl = 1;
	size_t n, len;

	if (!tmp || !query_plan(tmp, &p) || !(msg = query_error_msg(tmp))) {
		query_free(tmp);
		return;		/* err holds engine_plan_text()'s message */
	}
	query_error_pos(tmp, &l, &c);
	for (const char *x = s; *x; x++)
		nl += *x == '\n';
	if (l < 2) {			/* in CR_HEAD: the rule's start */
		l = 1;
		c = 1;
	} else if (l - 1 > nl) {	/* in CR_TAIL: just after the rule's end */
		l = nl;
		c = 0;
	} else {
		l -= 1;
	}
	for (int i = 1; i < l; i++)
		s = strchr(s, '\n') + 1;
	len = strcspn(s, "\n");
	if (c == 0)
		c = (int)len + 1;
	n = (size_t)snprintf(err, errlen, "%s:%d:%d: error: %s\n%.*s\n", CR_SOURCE, l, c, msg,
			     (int)len, s);
	for (int i = 0; i < c - 1 && n + 3 < errlen; i++)
		err[n++] = (size_t)i < len && s[i] == '\t' ? '\t' : ' ';
	if (n + 2 < errlen) {
		err[n++] = '^';
		err[n++] = '\n';
		err[n] = '\0';
	}
	*line = l;
	*col = c;
	query_free(tmp);
}

/* Compile and start a rule (not yet in the list). */
static struct crule *rule_start(struct crules *rs, const char *name, const char *expr,
				unsigned per_s, unsigned settle_ms, unsigned follow_ms,
				uint64_t created_ms,
				char *err, size_t errlen, int *line, int *col)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct crule *r = calloc(1, sizeof(*r));
	size_t len = strlen(CR_HEAD) + strlen(expr) + strlen(CR_TAIL) + 1;

	*line = *col = 0;
	if (!r || !(r->expr = strdup(expr)) || !(r->text = malloc(len))) {
		rule_free(r);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(r->text, len, "%s%s%s", CR_HEAD, expr, CR_TAIL);
	r->rs = rs;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->per_s = per_s;
	r->settle_ms = settle_ms;
	r->follow_ms = follow_ms;
	r->created_ms = created_ms;
	r->tokens = per_s;
	r->tokens_ns = clock_monotonic_ns();
	r->q = engine_plan_text(CR_SOURCE, r->text, strlen(r->text), &qo, &r->p, err, errlen);
	if (!r->q) {
		rule_error(r, err, errlen, line, col);
		rule_free(r);
		return NULL;
	}
	/* the predicate alone: no clause of its own (group, window, limit) */
	if (r->p->mode != PLAN_STREAM || r->p->ncols != CR_NCOLS || r->p->window_ns ||
	    r->p->limit) {
		snprintf(err, errlen, "a capture rule is a predicate over spans "
			 "(sp.duration > 50ms && sp.name == \"write\"), nothing more");
		rule_free(r);
		return NULL;
	}
	if (pthread_create(&r->thread, NULL, rule_main, r)) {
		snprintf(err, errlen, "cannot start a thread");
		rule_free(r);
		return NULL;
	}
	return r;
}

static void rule_stop(struct crule *r)
{
	r->stop = 1;
	pthread_join(r->thread, NULL);
	rule_free(r);
}

int crules_add(struct crules *rs, const char *name, const char *expr, unsigned per_s,
	       unsigned settle_ms, unsigned follow_ms, char *err, size_t errlen, int *line,
	       int *col)
{
	struct crule *r;
	int ret;

	*line = *col = 0;
	if (!standing_name_ok(name)) {
		snprintf(err, errlen, "a rule's name is 1 to %d of [A-Za-z0-9_]", CRULES_NAME_MAX);
		return -EINVAL;
	}
	if (per_s < 1 || per_s > CRULES_PER_S_MAX || settle_ms > CRULES_SETTLE_MS_MAX ||
	    follow_ms > CRULES_FOLLOW_MS_MAX) {
		snprintf(err, errlen, "per_s: 1 to %d captures a second; settle_ms: 0 to %d; "
			 "follow_ms: 0 to %d", CRULES_PER_S_MAX, CRULES_SETTLE_MS_MAX,
			 CRULES_FOLLOW_MS_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&rs->lock);
	for (r = rs->list; r; r = r->next)
		if (!strcmp(r->name, name))
			break;
	ret = r ? -EEXIST : rs->n >= CRULES_MAX ? -ENOSPC : 0;
	pthread_mutex_unlock(&rs->lock);
	if (ret == -EEXIST)
		snprintf(err, errlen, "a rule named %s exists (drop it first)", name);
	else if (ret)
		snprintf(err, errlen, "%d rules already (drop one)", CRULES_MAX);
	if (ret)
		return ret;
	r = rule_start(rs, name, expr, per_s, settle_ms, follow_ms, clock_realtime_ns() / 1000000u,
		       err, errlen, line, col);
	if (!r)
		return -EINVAL;
	pthread_mutex_lock(&rs->lock);
	r->next = rs->list;
	rs->list = r;
	rs->n++;
	ret = save(rs);
	pthread_mutex_unlock(&rs->lock);
	if (ret) {
		snprintf(err, errlen, "%s/rules.json: %s", rs->dir, strerror(-ret));
		crules_drop(rs, name);
	}
	return ret;
}

/* Set r's --with-query (a bad one, from a file: none). */
static void with_set(struct crule *r, const char *query, json_int_t last_ms)
{
	if (!query || !standing_name_ok(query) || last_ms < 1 || last_ms > CRULES_WITH_LAST_MS_MAX)
		return;
	snprintf(r->with_query, sizeof(r->with_query), "%s", query);
	r->with_last_ms = (unsigned)last_ms;
}

int crules_with_query(struct crules *rs, const char *name, const char *query,
		      unsigned last_ms, char *err, size_t errlen)
{
	struct crule *r;
	int ret;

	if (!standing_name_ok(query) || last_ms < 1 || last_ms > CRULES_WITH_LAST_MS_MAX) {
		snprintf(err, errlen, "with_query: a standing query's name; with_last_ms: 1 to %d",
			 CRULES_WITH_LAST_MS_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&rs->lock);
	r = rule_named(rs, name);
	if (r)
		with_set(r, query, last_ms);
	ret = r ? save(rs) : -ENOENT;
	pthread_mutex_unlock(&rs->lock);
	if (ret)
		snprintf(err, errlen, "%s", ret == -ENOENT ? "no such rule" : strerror(-ret));
	return ret;
}

int crules_drop(struct crules *rs, const char *name)
{
	struct crule *r = NULL;
	int ret;

	pthread_mutex_lock(&rs->lock);
	for (struct crule **pp = &rs->list; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name)) {
			r = *pp;
			*pp = r->next;
			rs->n--;
			break;
		}
	ret = r ? save(rs) : 0;
	pthread_mutex_unlock(&rs->lock);
	if (!r)
		return -ENOENT;
	if (ret)
		pr_warn("capture rule %s dropped, but %s/rules.json not rewritten: %s", name,
			rs->dir, strerror(-ret));
	rule_stop(r);
	return 0;
}

json_t *crules_list(struct crules *rs)
{
	json_t *a = json_array();

	pthread_mutex_lock(&rs->lock);
	for (struct crule *r = rs->list; a && r; r = r->next) {
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, "
				      "s:I, s:I, s:I, s:b}",
			"name", r->name, "expr", r->expr, "per_s", (int)r->per_s,
			"settle_ms", (int)r->settle_ms, "follow_ms", (int)r->follow_ms,
			"created_ms", (json_int_t)r->created_ms,
			"matches", (json_int_t)r->matches, "captures", (json_int_t)r->captures,
			"deduplicated", (json_int_t)r->deduped,
			"over_budget", (json_int_t)r->over_budget,
			"spans_late", (json_int_t)r->late, "unfollowed", (json_int_t)r->unfollowed,
			"running", r->running);

		with_json(r, o);
		json_array_append_new(a, o);
	}
	pthread_mutex_unlock(&rs->lock);
	return a;
}

void crules_metrics(struct crules *rs, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
		{ "fay_capture_rule_matches_total", "Spans a capture rule matched",
		  offsetof(struct crule, matches) },
		{ "fay_capture_rule_captures_total", "Captures a capture rule made",
		  offsetof(struct crule, captures) },
		{ "fay_capture_rule_deduplicated_total",
		  "Matches of a trace already pending or captured", offsetof(struct crule, deduped) },
		{ "fay_capture_rule_over_budget_total",
		  "Matches dropped: over the rule's captures per second",
		  offsetof(struct crule, over_budget) },
		{ "fay_capture_rule_late_spans_total",
		  "Spans of a captured trace stored by a follow round (late)",
		  offsetof(struct crule, late) },
		{ "fay_capture_rule_unfollowed_total",
		  "Captures not followed: too many following at once",
		  offsetof(struct crule, unfollowed) },
	};

	if (!rs)
		return;
	pthread_mutex_lock(&rs->lock);
	for (size_t i = 0; rs->list && i < sizeof(fam) / sizeof(fam[0]); i++) {
		prom_family(f, fam[i].name, "counter", fam[i].help);
		for (struct crule *r = rs->list; r; r = r->next) {
			fprintf(f, "%s{rule=\"", fam[i].name);
			prom_label(f, r->name);
			fprintf(f, "\"} %" PRIu64 "\n",
				*(const uint64_t *)((const char *)r + fam[i].off));
		}
	}
	pthread_mutex_unlock(&rs->lock);
}

/* ---- the registry --------------------------------------------------------- */

/* Start the rules of rules.json (a rule that no longer compiles is
 * warned about and left in the file). */
static int load(struct crules *rs, char *err, size_t errlen)
{
	char path[4200];
	json_error_t je;
	json_t *doc, *a, *v;
	size_t i;

	snprintf(path, sizeof(path), "%s/rules.json", rs->dir);
	doc = json_load_file(path, 0, &je);
	if (!doc) {
		struct stat st;

		if (stat(path, &st) && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
		return -EINVAL;
	}
	a = json_object_get(doc, "rules");
	json_array_foreach(a, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *expr = json_string_value(json_object_get(v, "expr"));
		json_t *fm = json_object_get(v, "follow_ms");
		char why[2048];
		int line, col;
		struct crule *r;

		if (!name || !expr || !standing_name_ok(name))
			continue;
		r = rule_start(rs, name, expr,
			       (unsigned)json_integer_value(json_object_get(v, "per_s")),
			       (unsigned)json_integer_value(json_object_get(v, "settle_ms")),
			       /* a rule of a fay without follow: the default */
			       json_is_integer(fm) ? (unsigned)json_integer_value(fm) :
			       CRULES_FOLLOW_MS_DEFAULT,
			       (uint64_t)json_integer_value(json_object_get(v, "created_ms")),
			       why, sizeof(why), &line, &col);
		if (!r) {
			pr_warn("capture rule %s of %s not started: %s", name, path, why);
			continue;
		}
		if (r->per_s < 1 || r->per_s > CRULES_PER_S_MAX)
			r->per_s = CRULES_PER_S_DEFAULT;
		if (r->follow_ms > CRULES_FOLLOW_MS_MAX)
			r->follow_ms = CRULES_FOLLOW_MS_DEFAULT;
		with_set(r, json_string_value(json_object_get(v, "with_query")),
			 json_integer_value(json_object_get(v, "with_last_ms")));
		/* its counts so far (a rules.json of a fay before: none) */
		for (size_t k = 0; k < CR_NCOUNTS; k++) {
			json_t *n = json_object_get(json_object_get(v, "counts"), cr_counts[k].key);

			if (json_is_integer(n) && json_integer_value(n) > 0)
				*count_of(r, k) = (uint64_t)json_integer_value(n);
		}
		r->next = rs->list;
		rs->list = r;
		rs->n++;
	}
	json_decref(doc);
	return 0;
}

struct crules *crules_new(struct collector *c, const char *dir, char *err, size_t errlen)
{
	struct crules *rs = calloc(1, sizeof(*rs));

	if (!rs) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	rs->c = c;
	snprintf(rs->dir, sizeof(rs->dir), "%s", dir);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		free(rs);
		return NULL;
	}
	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	pthread_cond_init(&rs->fcond, NULL);
	if (pthread_create(&rs->thread, NULL, capture_main, rs)) {
		snprintf(err, errlen, "cannot start a thread");
		pthread_cond_destroy(&rs->fcond);
		pthread_cond_destroy(&rs->cond);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return NULL;
	}
	if (pthread_create(&rs->fthread, NULL, follow_main, rs)) {
		snprintf(err, errlen, "cannot start a thread");
		pthread_mutex_lock(&rs->lock);
		rs->stop = 1;
		pthread_cond_broadcast(&rs->cond);
		pthread_mutex_unlock(&rs->lock);
		pthread_join(rs->thread, NULL);
		pthread_cond_destroy(&rs->fcond);
		pthread_cond_destroy(&rs->cond);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return NULL;
	}
	if (load(rs, err, errlen)) {
		crules_free(rs);
		return NULL;
	}
	return rs;
}

void crules_free(struct crules *rs)
{
	if (!rs)
		return;
	for (struct crule *r = rs->list; r; r = r->next)	/* no more matches */
		r->stop = 1;
	for (struct crule *r = rs->list; r; r = r->next)
		pthread_join(r->thread, NULL);
	pthread_mutex_lock(&rs->lock);
	rs->stop = 1;
	pthread_cond_broadcast(&rs->cond);
	pthread_cond_broadcast(&rs->fcond);
	pthread_mutex_unlock(&rs->lock);
	pthread_join(rs->thread, NULL);
	pthread_join(rs->fthread, NULL);
	pthread_mutex_lock(&rs->lock);
	save_counts(rs, true);		/* the last of them, for the next start */
	pthread_mutex_unlock(&rs->lock);
	while (rs->list) {
		struct crule *r = rs->list;

		rs->list = r->next;
		rule_free(r);
	}
	while (rs->pend) {
		struct cpend *pd = rs->pend;

		rs->pend = pd->next;
		free(pd);
	}
	while (rs->follow) {	/* their accounts stay "following": the list's
				 * next load says they were cut */
		struct cfollow *fo = rs->follow;

		rs->follow = fo->next;
		follow_free(fo);
	}
	pthread_cond_destroy(&rs->fcond);
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}
