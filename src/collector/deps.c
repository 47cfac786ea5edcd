// SPDX-License-Identifier: MIT
/*
 * The service dependency graph, as Zipkin's /api/v2/dependencies answers
 * it: links {parent, child, callCount, errorCount} derived from the spans
 * of each trace.
 *
 * For every span S of service B, its caller's service A is
 *  - the CLIENT (or PRODUCER) half that shares S's id, when S is the
 *    SERVER (CONSUMER) half of a shared span (BlkKin, Zipkin v1 style);
 *  - else the service of S's parent span (the one of S's own service when
 *    the parent id is shared by both halves, else the client half);
 *  - else, for a SERVER span with no parent in the trace, its
 *    remoteEndpoint service (an uninstrumented caller).
 * A != B makes one call A -> B, an error when S carries the error tag.
 * A CLIENT span whose callee left no span in the trace (no server half, no
 * child span in another service) calls its remoteEndpoint service.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ext.h"

struct dspan {
	uint64_t id, parent_id;
	uint8_t kind, error;
	char *svc, *remote;
};

struct link {
	char *parent, *child;
	uint64_t calls, errors;
};

struct deps {
	uint64_t hi, lo;
	int have;
	struct dspan *s;
	size_t n, cap;
	struct link *l;
	size_t nl, capl;
	int oom;
};

static char *dup_zs(struct zs_str s)
{
	return s.len ? strndup(s.p, s.len) : NULL;
}

static void link_add(struct deps *d, const char *parent, const char *child, int error)
{
	struct link *l;

	for (size_t i = 0; i < d->nl; i++) {
		l = &d->l[i];
		if (!strcmp(l->parent, parent) && !strcmp(l->child, child)) {
			l->calls++;
			l->errors += !!error;
			return;
		}
	}
	if (d->nl == d->capl) {
		size_t cap = d->capl ? d->capl * 2 : 32;
		struct link *nl = realloc(d->l, cap * sizeof(*nl));

		if (!nl) {
			d->oom = 1;
			return;
		}
		d->l = nl;
		d->capl = cap;
	}
	l = &d->l[d->nl];
	l->parent = strdup(parent);
	l->child = strdup(child);
	if (!l->parent || !l->child) {
		free(l->parent);
		free(l->child);
		d->oom = 1;
		return;
	}
	l->calls = 1;
	l->errors = !!error;
	d->nl++;
}

static int is_callee(uint8_t k)
{
	return k == SPAN_KIND_SERVER || k == SPAN_KIND_CONSUMER;
}

static int is_caller(uint8_t k)
{
	return k == SPAN_KIND_CLIENT || k == SPAN_KIND_PRODUCER;
}

/* The caller's service of span i, or NULL. */
static const char *caller_of(struct deps *d, size_t i)
{
	struct dspan *s = &d->s[i], *p = NULL;

	if (is_callee(s->kind)) {
		for (size_t j = 0; j < d->n; j++)
			if (j != i && d->s[j].id == s->id && is_caller(d->s[j].kind) && d->s[j].svc)
				return d->s[j].svc;
	}
	if (s->parent_id) {
		for (size_t j = 0; j < d->n; j++) {
			struct dspan *c = &d->s[j];

			if (j == i || c->id != s->parent_id || !c->svc)
				continue;
			if (s->svc && !strcmp(c->svc, s->svc)) {
				p = c;
				break;
			}
			if (!p || is_caller(c->kind))
				p = c;
		}
		if (p)
			return p->svc;
	}
	if (is_callee(s->kind) && s->remote)
		return s->remote;
	return NULL;
}

/* Does client span i have its callee's span in the trace? */
static int callee_traced(struct deps *d, size_t i)
{
	struct dspan *s = &d->s[i];

	for (size_t j = 0; j < d->n; j++) {
		struct dspan *c = &d->s[j];

		if (j == i)
			continue;
		if (c->id == s->id && is_callee(c->kind))
			return 1;
		if (c->parent_id == s->id && c->svc && s->svc && strcmp(c->svc, s->svc))
			return 1;
	}
	return 0;
}

static void trace_done(struct deps *d)
{
	for (size_t i = 0; i < d->n; i++) {
		struct dspan *s = &d->s[i];
		const char *a;

		if (!s->svc)
			continue;
		a = caller_of(d, i);
		if (a && strcmp(a, s->svc))
			link_add(d, a, s->svc, s->error);
		if (is_caller(s->kind) && s->remote && strcmp(s->remote, s->svc) &&
		    !callee_traced(d, i))
			link_add(d, s->svc, s->remote, s->error);
	}
	for (size_t i = 0; i < d->n; i++) {
		free(d->s[i].svc);
		free(d->s[i].remote);
	}
	d->n = 0;
}

static int on_row(void *ctx, const struct store_row *r)
{
	struct deps *d = ctx;
	struct dspan *s;

	if (d->have && (r->trace_hi != d->hi || r->trace_lo != d->lo))
		trace_done(d);
	d->have = 1;
	d->hi = r->trace_hi;
	d->lo = r->trace_lo;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct dspan *ns = realloc(d->s, cap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		d->s = ns;
		d->cap = cap;
	}
	s = &d->s[d->n++];
	s->id = r->id;
	s->parent_id = r->parent_id;
	s->kind = r->kind;
	s->error = r->error;
	s->svc = dup_zs(r->service);
	s->remote = dup_zs(r->remote_service);
	return d->oom ? -ENOMEM : 0;
}

json_t *deps_json(struct store_reader *r, uint64_t from_us, uint64_t to_us, int *ret)
{
	struct deps d = { 0 };
	json_t *a = NULL;

	*ret = store__scan(r, from_us, to_us, on_row, &d);
	trace_done(&d); /* the last trace (and its strings, on error too) */
	if (!*ret && d.oom)
		*ret = -ENOMEM;
	if (!*ret) {
		a = json_array();
		for (size_t i = 0; a && i < d.nl; i++)
			json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I}",
				"parent", d.l[i].parent, "child", d.l[i].child,
				"callCount", (json_int_t)d.l[i].calls,
				"errorCount", (json_int_t)d.l[i].errors));
		if (!a)
			*ret = -ENOMEM;
	}
	for (size_t i = 0; i < d.nl; i++) {
		free(d.l[i].parent);
		free(d.l[i].child);
	}
	free(d.l);
	free(d.s);
	return a;
}
