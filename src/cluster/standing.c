// SPDX-License-Identifier: MIT
/*
 * Standing cluster queries (standing.h).  Each runs on a thread of its
 * own through cluster_query_run(), with a sink that keeps the latest
 * merged window (for /metrics) and appends every window to the history
 * file.  When no agent is connected yet, or the cluster refuses the
 * query for now, it is retried every STANDING_RETRY_MS until dropped.
 */
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
#include "engine/driver.h"

#define STANDING_RETRY_MS	2000

struct sq {
	struct standing *s;
	char name[STANDING_NAME_MAX + 1];
	char *text;
	uint64_t grace_ns, created_ms, windows;
	struct query *q;
	const struct plan *p;
	volatile int stop;
	pthread_t thread;
	json_t *last;			/* the latest window line (under s->lock) */
	struct sq *next;
};

struct standing {
	struct cluster *cl;
	char dir[4096];
	pthread_mutex_t lock;		/* the list, each sq's last and windows */
	struct sq *list;
	unsigned n;
};

static bool name_ok(const char *n)
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

/* Append one window line to DIR/NAME.ndjson (rotated past the limit). */
static void append_history(struct sq *q, const char *json, size_t len)
{
	char path[4200], old[4300];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s.ndjson", q->s->dir, q->name);
	if (!stat(path, &st) && (uint64_t)st.st_size > STANDING_HISTORY_MAX) {
		snprintf(old, sizeof(old), "%s.1", path);
		rename(path, old);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_warn("standing query %s: %s: %s", q->name, path, strerror(errno));
		return;
	}
	if (write(fd, json, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
		pr_warn("standing query %s: %s: %s", q->name, path, strerror(errno));
	close(fd);
}

static int on_line(void *ctx, const char *json, size_t len)
{
	struct sq *q = ctx;
	json_t *j = json_loadb(json, len, 0, NULL), *t = json_object_get(j, "type");

	if (json_is_string(t) && !strcmp(json_string_value(t), "window")) {
		append_history(q, json, len);
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
	struct cluster_qopts o = { .grace_ns = q->grace_ns, .all = true };
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
	free(q->text);
	free(q);
}

/* A standing query compiled and started (not yet in the list). */
static struct sq *sq_start(struct standing *s, const char *name, const char *text,
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
	if (q->p->mode != PLAN_AGGREGATE || !q->p->window_ns) {
		snprintf(err, errlen, "a standing query needs aggregates and 'window DUR' (its windows are its history)");
		sq_free(q);
		return NULL;
	}
	if (pthread_create(&q->thread, NULL, sq_main, q)) {
		snprintf(err, errlen, "cannot start a thread");
		sq_free(q);
		return NULL;
	}
	return q;
}

static void sq_stop(struct sq *q)
{
	q->stop = 1;
	pthread_join(q->thread, NULL);
	sq_free(q);
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

		if (!n || !t || !name_ok(n)) {
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

struct standing *standing_new(struct cluster *cl, const char *dir, char *err, size_t errlen)
{
	struct standing *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cl = cl;
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	pthread_mutex_init(&s->lock, NULL);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		standing_free(s);
		return NULL;
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
	while (s->list) {
		struct sq *q = s->list;

		s->list = q->next;
		sq_stop(q);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int standing_add(struct standing *s, const char *name, const char *text, uint64_t grace_ns,
		 char *err, size_t errlen, int *line, int *col)
{
	struct sq *q;
	int ret;

	*line = *col = 0;
	if (!name_ok(name)) {
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

int standing_drop(struct standing *s, const char *name)
{
	struct sq **pp, *q = NULL;

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
		json_array_append_new(a, json_pack("{s:s, s:s, s:o?, s:I, s:I, s:I, s:O?}", "name", q->name,
			"query", q->text, "columns", plan_columns_json(q->p), "grace_ms", (json_int_t)(q->grace_ns / 1000000),
			"created_ms", (json_int_t)q->created_ms, "windows", (json_int_t)q->windows,
			"last", q->last));
	pthread_mutex_unlock(&s->lock);
	out = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return out;
}

int standing_results(struct standing *s, const char *name, unsigned limit, char **json)
{
	char path[4200], *line = NULL;
	size_t cap = 0, n = 0;
	json_t **ring = calloc(limit ? limit : 1, sizeof(*ring)), *a, *o;
	const char *text = NULL;
	const struct plan *p = NULL;
	FILE *f;

	if (!ring)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	for (struct sq *q = s->list; q; q = q->next)
		if (!strcmp(q->name, name)) {
			text = q->text;
			p = q->p;
		}
	o = text ? json_pack("{s:s, s:s, s:o?}", "name", name, "query", text,
			     "columns", plan_columns_json(p)) : NULL;
	pthread_mutex_unlock(&s->lock);
	if (!text) {
		free(ring);
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s.ndjson", s->dir, name);
	f = fopen(path, "re");
	while (f && limit && getline(&line, &cap, f) > 0) {
		json_t *w = json_loads(line, 0, NULL);

		if (!w)
			continue;	/* a line cut by a crash */
		json_decref(ring[n % limit]);
		ring[n % limit] = w;
		n++;
	}
	if (f)
		fclose(f);
	free(line);
	a = json_array();
	for (size_t i = n > limit ? n - limit : 0; a && i < n; i++)
		json_array_append(a, ring[i % limit]);
	for (unsigned i = 0; i < limit; i++)
		json_decref(ring[i]);
	free(ring);
	json_object_set_new(o, "windows", a ? a : json_array());
	*json = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return *json ? 0 : -ENOMEM;
}

/* A Prometheus label value: \ " and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
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

	fprintf(f, "# HELP fay_query_%s standing query %s: its latest window\n", q->name, q->name);
	fprintf(f, "# TYPE fay_query_%s gauge\n", q->name);
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
