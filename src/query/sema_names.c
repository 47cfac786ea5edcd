// SPDX-License-Identifier: MIT
/*
 * FayQL semantic checks, names: the fields of each source, and what a
 * name or member resolves to (a field, arg(N), tag("KEY"), a let, the
 * group's key).  The rest of the checks are in sema.c and sema_expr.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"
#include "query/query_int.h"
#include "query/sema_int.h"

#define M(k)		(1u << (k))
#define M_PROBES	(M(SRC_SYSCALL) | M(SRC_TRACEPOINT) | M(SRC_KFUNC) | \
			 M(SRC_UFUNC) | M(SRC_PFUNC) | M(SRC_USDT) | M(SRC_PROFILE))
#define M_EXIT		(M(SRC_SYSCALL) | M(SRC_KFUNC) | M(SRC_UFUNC) | M(SRC_PFUNC))
#define M_ALL		(M_PROBES | M(SRC_SPANS))

static const struct {
	const char *name;
	enum field_id id;
	enum vtype type;
	int strsize;
	unsigned srcs;
} fields[] = {
	{ "time",      F_TIME,      VT_INT, 0, M_ALL },
	{ "pid",       F_PID,       VT_INT, 0, M_ALL },
	{ "tid",       F_TID,       VT_INT, 0, M_PROBES },
	{ "vpid",      F_VPID,      VT_INT, 0, M_PROBES },
	{ "cgroup",    F_CGROUP,    VT_STR, QUERY_STR_MAX, M_ALL },
	{ "container", F_CONTAINER, VT_STR, QUERY_STR_MAX, M_ALL },
	{ "comm",      F_COMM,      VT_STR, QUERY_COMM_LEN, M_PROBES },
	{ "cpu",       F_CPU,       VT_INT, 0, M_PROBES },
	{ "uid",       F_UID,       VT_INT, 0, M_PROBES },
	{ "ret",       F_RET,       VT_INT, 0, M_EXIT },
	{ "duration",  F_DURATION,  VT_INT, 0, M_EXIT | M(SRC_SPANS) },
	{ "unwound",   F_UNWOUND,   VT_INT, 0, M(SRC_UFUNC) | M(SRC_PFUNC) },
	{ "host",      F_HOST,      VT_STR, QUERY_STR_MAX, M_ALL },
	{ "name",      F_NAME,      VT_STR, QUERY_STR_MAX, M(SRC_SPANS) },
	{ "name",      F_PROBE,     VT_STR, QUERY_STR_MAX, M_PROBES },
	{ "kstack",    F_KSTACK,    VT_STR, QUERY_STACK_STR, M_PROBES },
	{ "ustack",    F_USTACK,    VT_STR, QUERY_STACK_STR, M_PROBES },
	{ "service",   F_SERVICE,   VT_STR, QUERY_STR_MAX, M(SRC_SPANS) },
	{ "trace_id",  F_TRACE_ID,  VT_INT, 0,
	  M(SRC_SPANS) | M(SRC_UFUNC) | M(SRC_PFUNC) | M(SRC_PROFILE) },
	{ "trace_id_hi", F_TRACE_HI, VT_INT, 0, M(SRC_SPANS) },
	{ "span_name", F_SPAN_NAME, VT_STR, QUERY_STR_MAX,
	  M(SRC_UFUNC) | M(SRC_PFUNC) | M(SRC_PROFILE) },
	{ "span_id",   F_SPAN_ID,   VT_INT, 0, M(SRC_SPANS) },
	{ "parent_id", F_PARENT_ID, VT_INT, 0, M(SRC_SPANS) },
	{ "kind",      F_KIND,      VT_STR, 16, M(SRC_SPANS) },
	{ "error",     F_ERROR,     VT_INT, 0, M(SRC_SPANS) },
};

const char *field_name(enum field_id f)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (fields[i].id == f)
			return fields[i].name;
	return "?";
}

const char *src_kind_name(enum src_kind k)
{
	static const char *const n[] = {
		[SRC_SYSCALL] = "syscall", [SRC_TRACEPOINT] = "tracepoint",
		[SRC_KFUNC] = "kernel.function", [SRC_UFUNC] = "function",
		[SRC_PFUNC] = "process().function", [SRC_USDT] = "usdt",
		[SRC_SPANS] = "spans", [SRC_PROFILE] = "profile",
	};
	return n[k];
}

static int list_fields(struct sema *s, char *buf, size_t cap)
{
	const struct ast_source *src = &s->aq->src;
	size_t n = 0;

	buf[0] = '\0';
	if (src->tp)
		for (int i = 0; i < src->tp->nfields && n < cap; i++)
			if (strncmp(src->tp->fields[i].name, "common_", 7))
				n += snprintf(buf + n, cap - n, "%s, ",
					      src->tp->fields[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(fields) && n < cap; i++) {
		if (!(fields[i].srcs & M(src->kind)) ||
		    (src->tp && tp_field_find(src->tp, fields[i].name)))
			continue;
		n += snprintf(buf + n, cap - n, "%s, ", fields[i].name);
		if (fields[i].id == F_UID && (M(src->kind) & (M_EXIT | M(SRC_USDT))))
			n += snprintf(buf + n, cap - n, "arg(N), ");
	}
	if (n >= 2 && n < cap)
		buf[n - 2] = '\0';
	return 0;
}

static int check_field(struct sema *s, struct node *n)
{
	const struct ast_source *src = &s->aq->src;
	char list[512];

	if (src->tp) {
		const struct tp_field *f = tp_field_find(src->tp, n->name);

		if (f) {
			if (f->is_array)
				return query_errorf(s->q, &n->loc,
						    "tracepoint field '%s' is an array (%s); only integers and char arrays (strings) can be used",
						    f->name, f->ctype);
			/* tp_prog_is_valid_access() refuses the first 8 bytes */
			if (f->offset < 8)
				return query_errorf(s->q, &n->loc,
						    "tracepoint field '%s' (offset %d) is in the record's common header, which the kernel does not let BPF programs read; use %s.pid, %s.tid or %s.comm",
						    f->name, f->offset, s->aq->var, s->aq->var,
						    s->aq->var);
			n->sem = S_TPFIELD;
			n->tpf = f;
			n->per_event = true;
			if (f->is_string) {
				n->type = VT_STR;
				n->strsize = f->data_loc || f->size > QUERY_STR_MAX ?
					     QUERY_STR_MAX : f->size;
			} else {
				n->type = VT_INT;
			}
			return 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		if (strcmp(fields[i].name, n->name))
			continue;
		/* a name may have an entry per kind of source ("name") */
		if (!(fields[i].srcs & M(src->kind)) && i + 1 < ARRAY_SIZE(fields) &&
		    !strcmp(fields[i + 1].name, n->name))
			continue;
		if (!(fields[i].srcs & M(src->kind))) {
			if (fields[i].id == F_UNWOUND)
				return query_errorf(s->q, &n->loc,
						    "'unwound' marks the exit of a user function's call left by longjmp or a C++ exception (function, process(PID).function); %s has no such exit",
						    src_kind_name(src->kind));
			if ((fields[i].srcs & M_EXIT) && !(fields[i].srcs & M(SRC_TRACEPOINT)))
				return query_errorf(s->q, &n->loc,
						    "'%s' needs a source with an exit (syscall, kernel.function, function, process(PID).function); %s has none",
						    n->name, src_kind_name(src->kind));
			list_fields(s, list, sizeof(list));
			return query_errorf(s->q, &n->loc,
					    "field '%s' is not available on %s (fields: %s)",
					    n->name, src_kind_name(src->kind), list);
		}
		n->sem = S_FIELD;
		n->field = fields[i].id;
		n->type = fields[i].type;
		n->strsize = fields[i].strsize;
		n->per_event = true;
		if (n->field == F_KSTACK || n->field == F_USTACK)
			n->ival = QUERY_STACK_DEPTH;
		n->needs_exit = n->field == F_RET || n->field == F_UNWOUND ||
				(n->field == F_DURATION && src->kind != SRC_SPANS);
		return 0;
	}
	if (!strcmp(n->name, "arg"))
		return query_errorf(s->q, &n->loc, "'arg' takes an index: %s.arg(N)",
				    s->aq->var);
	list_fields(s, list, sizeof(list));
	if (src->tp && src->nnames)
		return query_errorf(s->q, &n->loc,
				    "unknown field '%s' for tracepoint '%s': not a field of all the %d events it matches, at one offset and type (fields: %s)",
				    n->name, src->arg, src->nnames, list);
	if (src->tp)
		return query_errorf(s->q, &n->loc,
				    "unknown field '%s' for tracepoint '%s' (fields: %s)",
				    n->name, src->arg, list);
	return query_errorf(s->q, &n->loc, "unknown field '%s' (fields of %s: %s)",
			    n->name, src_kind_name(src->kind), list);
}

int sema_check_arg(struct sema *s, struct node *n)
{
	const struct ast_source *src = &s->aq->src;
	int64_t i;
	int max = src->kind == SRC_USDT ? 11 : 5;

	switch (src->kind) {
	case SRC_TRACEPOINT: {
		char list[512];

		list_fields(s, list, sizeof(list));
		return query_errorf(s->q, &n->loc,
				    "tracepoints have named fields, not arguments: use %s.NAME (fields: %s)",
				    s->aq->var, list);
	}
	case SRC_PROFILE:
	case SRC_SPANS:
		return query_errorf(s->q, &n->loc, "%s events have no arguments",
				    src_kind_name(src->kind));
	default:
		break;
	}
	if (n->nargs != 1)
		return query_errorf(s->q, &n->loc,
				    "arg() takes one constant index: %s.arg(N)", s->aq->var);
	if (!node_const(n->args[0], &i))
		return query_errorf(s->q, &n->args[0]->loc,
				    "the index of arg() must be a constant integer");
	if (i < 0 || i > max) {
		if (src->kind == SRC_USDT)
			return query_errorf(s->q, &n->args[0]->loc,
					    "arg(%lld) is out of range: USDT probes have at most 12 arguments, arg(0)..arg(11)",
					    (long long)i);
		return query_errorf(s->q, &n->args[0]->loc,
				    "arg(%lld) is out of range: a probe reads the six register arguments arg(0)..arg(5) (the calling convention passes the first six in registers; later ones are on the stack, where probes cannot name them)",
				    (long long)i);
	}
	n->sem = S_ARG;
	n->ival = (uint64_t)i;
	n->type = VT_INT;
	n->per_event = true;
	return 0;
}

/* s.kstack(N) / s.ustack(N): the stack's N innermost frames. */
int sema_check_stack(struct sema *s, struct node *n)
{
	int64_t d;
	int err;

	if (n->nargs != 1)
		return query_errorf(s->q, &n->loc,
				    "%s() takes one constant depth: %s.%s(16) (or %s.%s: %d frames)",
				    n->name, s->aq->var, n->name, s->aq->var, n->name,
				    QUERY_STACK_DEPTH);
	if (!node_const(n->args[0], &d))
		return query_errorf(s->q, &n->args[0]->loc,
				    "the depth of %s() must be a constant integer", n->name);
	if (d < 1 || d > QUERY_STACK_DEPTH_MAX)
		return query_errorf(s->q, &n->args[0]->loc,
				    "%s(%lld): a stack keeps 1 to %d frames (the kernel's perf_event_max_stack)",
				    n->name, (long long)d, QUERY_STACK_DEPTH_MAX);
	err = check_field(s, n);
	if (err)
		return err;
	n->ival = (uint64_t)d;
	return 0;
}

/* sp.tag("KEY") of a spans(...) event: a string, "" when absent. */
int sema_check_tag(struct sema *s, struct node *n)
{
	struct ast_query *aq = s->aq;
	const struct node *k = n->nargs == 1 ? n->args[0] : NULL;
	int i;

	if (aq->src.kind != SRC_SPANS)
		return query_errorf(s->q, &n->loc,
				    "tag() is a method of spans(...) events; %s events have no tags",
				    src_kind_name(aq->src.kind));
	if (!k || k->kind != N_STR)
		return query_errorf(s->q, &n->loc,
				    "tag() takes one constant string: %s.tag(\"KEY\")", aq->var);
	if (!k->len || k->len >= QUERY_STR_MAX || memchr(k->str, '\0', k->len))
		return query_errorf(s->q, &k->loc,
				    "a tag key is 1 to %d bytes, with no NUL", QUERY_STR_MAX - 1);
	for (i = 0; i < aq->ntags; i++)
		if (!strcmp(aq->tags[i], k->str))
			break;
	if (i == aq->ntags) {
		if (aq->ntags == QUERY_MAX_TAGS)
			return query_errorf(s->q, &k->loc,
					    "a query names at most %d tag keys", QUERY_MAX_TAGS);
		aq->tags[aq->ntags++] = k->str;
	}
	n->sem = S_TAG;
	n->idx = i;
	n->type = VT_STR;
	n->strsize = QUERY_STR_MAX;
	n->per_event = true;
	return 0;
}

int sema_check_member(struct sema *s, struct node *n, enum cx cx)
{
	const struct ast_query *aq = s->aq;
	const struct ast_group *g = aq->group;

	if (n->a->kind == N_IDENT && !strcmp(n->a->name, aq->var))
		return check_field(s, n);
	if (g && n->a->kind == N_IDENT && !strcmp(n->a->name, g->into)) {
		if (cx != CX_SELECT && cx != CX_ORDER)
			return query_errorf(s->q, &n->loc,
					    "the group '%s' is only known in select and order by",
					    g->into);
		if (!strcmp(n->name, "key")) {
			if (g->tuple)
				return query_errorf(s->q, &n->loc,
						    "the group key is a tuple; name a part of it: %s.%s",
						    g->into, g->keys[0].name);
			n->sem = S_KEY;
			n->idx = 0;
			n->type = g->keys[0].e->type;
			n->strsize = g->keys[0].e->strsize;
			return 0;
		}
		for (int i = 0; g->tuple && i < g->nkeys; i++)
			if (!strcmp(g->keys[i].name, n->name)) {
				n->sem = S_KEY;
				n->idx = i;
				n->type = g->keys[i].e->type;
				n->strsize = g->keys[i].e->strsize;
				return 0;
			}
		if (aggr_lookup(n->name) >= 0)
			return query_errorf(s->q, &n->loc,
					    "'%s' is an aggregate: call it, %s.%s(...)",
					    n->name, g->into, n->name);
		if (!g->tuple)
			return query_errorf(s->q, &n->loc,
					    "unknown group field '%s' (the group has %s.key and aggregates such as %s.count())",
					    n->name, g->into, g->into);
		char list[256];
		size_t l = 0;

		list[0] = '\0';
		for (int i = 0; i < g->nkeys && l < sizeof(list); i++)
			l += snprintf(list + l, sizeof(list) - l, "%s%s",
				      i ? ", " : "", g->keys[i].name);
		return query_errorf(s->q, &n->loc,
				    "unknown group field '%s' (the key has: %s)",
				    n->name, list);
	}
	if (n->a->kind == N_IDENT)
		TRY(sema_check_expr(s, n->a, cx));	/* reports an unknown name */
	return query_errorf(s->q, &n->loc,
			    "'.%s' applies to the event '%s' or to the group",
			    n->name, aq->var);
}

int sema_check_ident(struct sema *s, struct node *n, enum cx cx)
{
	const struct ast_query *aq = s->aq;

	for (int i = s->nlets - 1; i >= 0; i--)
		if (!strcmp(aq->lets[i]->name, n->name)) {
			const struct node *e = aq->lets[i]->e;

			n->sem = S_LET;
			n->idx = i;
			n->type = e->type;
			n->strsize = e->strsize;
			n->needs_exit = e->needs_exit;
			n->per_event = true;
			return 0;
		}
	if (!strcmp(n->name, aq->var))
		return query_errorf(s->q, &n->loc,
				    "'%s' is the event; use one of its fields, e.g. %s.pid",
				    n->name, n->name);
	if (aq->group && !strcmp(n->name, aq->group->into) &&
	    (cx == CX_SELECT || cx == CX_ORDER))
		return query_errorf(s->q, &n->loc,
				    "'%s' is the group; use %s.key or an aggregate such as %s.count()",
				    n->name, n->name, n->name);
	if (!strcmp(n->name, "now"))
		return query_errorf(s->q, &n->loc,
				    "'now' is only allowed in a time limit: where %s.time < now + DURATION",
				    aq->var);
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (!strcmp(fields[i].name, n->name))
			return query_errorf(s->q, &n->loc,
					    "unknown name '%s' (did you mean %s.%s?)",
					    n->name, aq->var, n->name);
	return query_errorf(s->q, &n->loc, "unknown name '%s'", n->name);
}
