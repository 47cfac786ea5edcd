// SPDX-License-Identifier: MIT
/*
 * The planner's expressions: checked AST nodes to pexpr trees (plan.h),
 * bounded in size and depth, lets inlined where no let is computed,
 * arguments an exit program reads carried in the entry record, str()
 * reading user or kernel memory as the source says.
 */
#include <errno.h>
#include <string.h>

#include "common/cgroup.h"
#include "query/plan_int.h"
#include "query/spanctx.h"

struct pexpr *px_new(struct planner *pl, enum px_op op, const struct node *n)
{
	struct pexpr *e;

	if (++pl->nodes > PLAN_MAX_NODES) {
		pl->fail = query_errorf(pl->q, n ? &n->loc : &pl->aq->loc,
					"query too large once its lets are expanded (more than %d operations); use fewer lets built from lets",
					PLAN_MAX_NODES);
		return NULL;
	}
	e = arena_alloc(pl->a, sizeof(*e));

	if (e) {
		e->op = op;
		e->type = VT_INT;
		e->idx = -1;
		if (n)
			e->loc = n->loc;
	}
	return e;
}

/*
 * Which memory str() reads.  System call arguments (syscall sources and
 * the fields of syscalls:sys_enter_*) and the arguments of user functions
 * and USDT sites are user addresses.  Tracefs formats do not say which
 * pointer fields are __user, nor does a kernel function's register: there
 * the kernel is read first and, when that fails, user memory (a user
 * address fails the kernel read on x86-64: copy_from_kernel_nofault
 * refuses it).  A read that fails both ways is counted, not hidden.
 */
static void str_memory(const struct ast_query *aq, struct pexpr *e)
{
	switch (aq->src.kind) {
	case SRC_SYSCALL:
	case SRC_UFUNC:
	case SRC_PFUNC:
	case SRC_USDT:
		e->user = true;
		return;
	case SRC_TRACEPOINT:
		if (!strcmp(aq->src.part[0], "syscalls")) {
			e->user = true;
			return;
		}
		break;
	default:
		break;
	}
	e->either = true;
}

/* The entry record slot holding argument n, added when new. */
static int saved_arg(struct planner *pl, int n, const struct node *at)
{
	struct plan *p = pl->p;

	for (int i = 0; i < p->nsaved; i++)
		if (p->saved[i].kind == SAVE_ARG && p->saved[i].arg == n)
			return i;
	if (p->nsaved == PLAN_MAX_SAVED)
		return query_errorf(pl->q, &at->loc,
				    "too many arguments to carry from entry to exit (at most %d)",
				    PLAN_MAX_SAVED - 1);
	p->saved[p->nsaved].kind = SAVE_ARG;
	p->saved[p->nsaved].arg = n;
	return p->nsaved++;
}

static enum px_op binop(enum tok_kind t)
{
	switch (t) {
	case T_PLUS: return PX_ADD;
	case T_MINUS: return PX_SUB;
	case T_STAR: return PX_MUL;
	case T_SLASH: return PX_DIV;
	case T_PERCENT: return PX_MOD;
	case T_AMP: return PX_AND;
	case T_PIPE: return PX_OR;
	case T_CARET: return PX_XOR;
	case T_SHL: return PX_SHL;
	case T_SHR: return PX_SHR;
	case T_EQ: return PX_EQ;
	case T_NE: return PX_NE;
	case T_LT: return PX_LT;
	case T_LE: return PX_LE;
	case T_GT: return PX_GT;
	case T_GE: return PX_GE;
	case T_ANDAND: return PX_LAND;
	case T_OROR: return PX_LOR;
	default: return PX_NOPS;
	}
}

static int conv_sem(struct planner *pl, const struct node *n, struct pctx cx,
		    struct pexpr **out)
{
	const struct ast_query *aq = pl->aq;
	struct pexpr *e = NULL;
	int slot, err;

	switch (n->sem) {
	case S_FIELD:
		if (aq->src.kind == SRC_SPANS && spanctx_field(n->field)) {
			/* a span's fields are its context's (spanctx.h) */
			TRYP(e = px_new(pl, PX_TPFIELD, n));
			e->tpf = spanctx_field(n->field);
		} else if (n->field == F_KSTACK || n->field == F_USTACK) {
			return query_errorf(pl->q, &n->loc,
					    "a stack is a group key only: group %s by %s.%s into g select { stack: g.key, n: g.count() }",
					    aq->var, aq->var, field_name(n->field));
		} else if (n->field == F_PROBE) {
			err = plan_names_build(pl);
			if (err)
				return err;
			TRYP(e = px_new(pl, PX_FIELD, n));
			e->field = n->field;
		} else if (n->field == F_TIME && cx.at_exit) {
			TRYP(e = px_new(pl, PX_SAVED, n));
			e->idx = 0;
		} else {
			TRYP(e = px_new(pl, PX_FIELD, n));
			e->field = n->field;
		}
		break;
	case S_ARG:
		if (cx.at_exit) {
			slot = saved_arg(pl, (int)n->ival, n);
			if (slot < 0)
				return slot;
			TRYP(e = px_new(pl, PX_SAVED, n));
			e->idx = slot;
		} else {
			TRYP(e = px_new(pl, PX_ARG, n));
			e->idx = (int)n->ival;
		}
		break;
	case S_TPFIELD:
		TRYP(e = px_new(pl, PX_TPFIELD, n));
		e->tpf = n->tpf;
		break;
	case S_TAG:
		TRYP(e = px_new(pl, PX_TPFIELD, n));
		e->tpf = &pl->tagf[n->idx];
		break;
	case S_LET:
		if (cx.inline_lets)
			return plan_conv(pl, aq->lets[n->idx]->e, cx, out);
		TRYP(e = px_new(pl, PX_LET, n));
		e->idx = n->idx;
		break;
	case S_STRREAD:
		TRYP(e = px_new(pl, PX_STRREAD, n));
		str_memory(aq, e);
		err = plan_conv(pl, n->args[0], cx, &e->a);
		if (err)
			return err;
		break;
	case S_KEY:
		TRYP(e = px_new(pl, PX_KEY, n));
		e->idx = n->idx;
		break;
	case S_AGGR:
		TRYP(e = px_new(pl, PX_AGG, n));
		e->idx = n->idx;
		break;
	case S_COL:
		return plan_conv(pl, aq->cols[n->idx].e, cx, out);
	case S_NOW:
		TRYP(e = px_new(pl, PX_CONST, n));
		e->val = 1;
		break;
	default:
		return query_errorf(pl->q, &n->loc, "internal: cannot plan '%s'",
				    n->name ? n->name : "?");
	}
	e->type = n->type;
	e->size = n->strsize;
	*out = e;
	return 0;
}

static int conv_node(struct planner *pl, const struct node *n, struct pctx cx,
		     struct pexpr **out);

bool node_is_stack(const struct node *n)
{
	return n->sem == S_FIELD && (n->field == F_KSTACK || n->field == F_USTACK);
}

bool px_is_name(const struct plan *p, const struct pexpr *e)
{
	if (e->op == PX_LET)
		return px_is_name(p, p->lets[e->idx].e);
	return e->op == PX_FIELD && e->field == F_PROBE && e->type == VT_STR;
}

/* Is n the probe's name (s.name, or a let of it)? */
static bool node_is_name(const struct ast_query *aq, const struct node *n)
{
	if (n->sem == S_LET)
		return node_is_name(aq, aq->lets[n->idx]->e);
	return n->sem == S_FIELD && n->field == F_PROBE;
}

enum field_id px_cgroup(const struct plan *p, const struct pexpr *e)
{
	if (e->op == PX_LET)
		return px_cgroup(p, p->lets[e->idx].e);
	if (e->op == PX_FIELD && e->type == VT_STR &&
	    (e->field == F_CGROUP || e->field == F_CONTAINER))
		return e->field;
	return F_TIME;
}

static const struct node *node_cgroup(const struct ast_query *aq, const struct node *n)
{
	if (n->sem == S_LET)
		return node_cgroup(aq, aq->lets[n->idx]->e);
	return n->sem == S_FIELD && (n->field == F_CGROUP || n->field == F_CONTAINER) ?
	       n : NULL;
}

struct cg_match {
	enum field_id f;
	const char *want;
	size_t len;
	uint64_t ids[PLAN_MAX_CGROUPS];
	int n;
};

static int cg_match_cb(uint64_t id, const char *path, void *arg)
{
	struct cg_match *m = arg;
	char c[QUERY_STR_MAX];
	const char *v = path;

	if (m->f == F_CONTAINER) {
		cgroup_container(path, c, sizeof(c));
		v = c;
	}
	if (strlen(v) != m->len || memcmp(v, m->want, m->len))
		return 0;
	if (m->n == PLAN_MAX_CGROUPS)
		return -E2BIG;
	m->ids[m->n++] = id;
	return 0;
}

/* s.container == "web-1", s.cgroup == "/system.slice/x.service": the
 * cgroup ids that name it, found in the cgroup2 file system now, compared
 * in the probe with bpf_get_current_cgroup_id() (== : any of them; != :
 * none).  A name no cgroup has is refused. */
static int conv_cgroup_cmp(struct planner *pl, const struct node *n, const struct node *f,
			   const struct node *lit, struct pexpr **out)
{
	struct cg_match m = { f->field, lit->str, lit->len, { 0 }, 0 };
	struct pexpr *e = NULL;
	int rc = cgroup_foreach(cg_match_cb, &m);

	if (rc == -ENOENT)
		return query_errorf(pl->q, &lit->loc, "no cgroup2 file system is mounted "
				    "(/sys/fs/cgroup, /sys/fs/cgroup/unified): %s cannot be "
				    "compared", field_name(f->field));
	if (rc == -E2BIG)
		return query_errorf(pl->q, &lit->loc, "more than %d cgroups are named "
				    "\"%.*s\"", PLAN_MAX_CGROUPS, (int)lit->len, lit->str);
	if (!m.n)
		return query_errorf(pl->q, &lit->loc, "no %s is named \"%.*s\" on this machine "
				    "now (%s)", f->field == F_CONTAINER ? "container" : "cgroup",
				    (int)lit->len, lit->str, f->field == F_CONTAINER ?
				    "names come from cgroup paths: machine-NAME.scope, "
				    "libpod-ID.scope, docker-ID.scope, cri-containerd-ID.scope, "
				    "crio-ID.scope; IDs by their first 12 digits" :
				    "a path under the cgroup2 root, \"/\" for the root");
	for (int i = 0; i < m.n; i++) {
		struct pexpr *c, *id, *x;

		TRYP(x = px_new(pl, n->op == T_EQ ? PX_EQ : PX_NE, n));
		TRYP(id = px_new(pl, PX_FIELD, n));
		id->field = f->field;
		id->type = VT_INT;
		TRYP(c = px_new(pl, PX_CONST, lit));
		c->val = (int64_t)m.ids[i];
		x->a = id;
		x->b = c;
		if (e) {
			struct pexpr *j;

			TRYP(j = px_new(pl, n->op == T_EQ ? PX_LOR : PX_LAND, n));
			j->a = e;
			j->b = x;
			x = j;
		}
		e = x;
	}
	*out = e;
	return 0;
}

/* s.name == "read": the name's id against the literal's, integers in the
 * probe (which never holds the name itself).  A literal that names
 * nothing the source can fire is refused. */
static int conv_name_cmp(struct planner *pl, const struct node *n,
			 const struct node *lit, struct pexpr **out)
{
	const struct plan_names *t;
	struct pexpr *e, *id, *c;
	int64_t v;
	int err = plan_names_build(pl);

	if (err)
		return err;
	t = pl->p->names;
	if (t->src == PN_COOKIE && !t->n)
		return query_errorf(pl->q, &lit->loc,
				    "s.name of a wildcard is known once the probe attaches: it can be a key or a column, not compared; name the function in the pattern instead");
	v = plan_name_id(pl->p, lit->str, lit->len);
	if (v < 0) {
		if (t->src == PN_CONST)
			return query_errorf(pl->q, &lit->loc,
					    "this source's name is \"%s\" (the %s it probes): comparing it with \"%.*s\" is always %s",
					    t->name[0], t->what, (int)lit->len, lit->str,
					    n->op == T_EQ ? "false" : "true");
		return query_errorf(pl->q, &lit->loc,
				    "no %s is named \"%.*s\" on this machine (%s)",
				    t->what, (int)lit->len, lit->str, t->how);
	}
	TRYP(e = px_new(pl, n->op == T_EQ ? PX_EQ : PX_NE, n));
	TRYP(id = px_new(pl, PX_FIELD, n));
	id->field = F_PROBE;
	id->type = VT_INT;
	TRYP(c = px_new(pl, PX_CONST, lit));
	c->val = v;
	e->a = id;
	e->b = c;
	*out = e;
	return 0;
}

/* n as a pexpr tree, at most PLAN_MAX_DEPTH deep (plan_int.h). */
int plan_conv(struct planner *pl, const struct node *n, struct pctx cx,
	      struct pexpr **out)
{
	int err;

	if (pl->depth >= PLAN_MAX_DEPTH)
		return query_errorf(pl->q, &n->loc,
				    "expression nested too deeply once its lets are expanded (more than %d levels); use fewer lets built from lets",
				    PLAN_MAX_DEPTH);
	pl->depth++;
	err = n->sem != S_NONE ? conv_sem(pl, n, cx, out) : conv_node(pl, n, cx, out);
	pl->depth--;
	return err;
}

static int conv_node(struct planner *pl, const struct node *n, struct pctx cx,
		     struct pexpr **out)
{
	struct pexpr *e;
	int err;

	switch (n->kind) {
	case N_INT:
		TRYP(e = px_new(pl, PX_CONST, n));
		e->val = (int64_t)n->ival;
		break;
	case N_STR:
		TRYP(e = px_new(pl, PX_STR, n));
		e->str = n->str;
		e->len = n->len;
		e->type = VT_STR;
		e->size = (int)n->len + 1;
		break;
	case N_UNARY:
		TRYP(e = px_new(pl, n->op == T_MINUS ? PX_NEG :
				 n->op == T_BANG ? PX_NOT : PX_BNOT, n));
		err = plan_conv(pl, n->a, cx, &e->a);
		if (err)
			return err;
		break;
	case N_BINARY: {
		const struct node *l = n->a, *r = n->b;
		enum px_op op = binop(n->op);

		if ((n->op == T_EQ || n->op == T_NE) &&
		    ((node_is_name(pl->aq, l) && r->kind == N_STR) ||
		     (node_is_name(pl->aq, r) && l->kind == N_STR)))
			return conv_name_cmp(pl, n, l->kind == N_STR ? l : r, out);
		/* a probe compares cgroup ids; a span's context holds the
		 * strings (spanctx.h), compared as any */
		if ((n->op == T_EQ || n->op == T_NE) && pl->aq->src.kind != SRC_SPANS &&
		    ((node_cgroup(pl->aq, l) && r->kind == N_STR) ||
		     (node_cgroup(pl->aq, r) && l->kind == N_STR)))
			return conv_cgroup_cmp(pl, n, node_cgroup(pl->aq, l) ? : node_cgroup(pl->aq, r),
					       l->kind == N_STR ? l : r, out);
		if (l->type == VT_STR || r->type == VT_STR) {
			op = n->op == T_EQ ? PX_STREQ : PX_STRNE;
			if (l->kind == N_STR) {	/* literal goes on the right */
				l = n->b;
				r = n->a;
			}
		}
		TRYP(e = px_new(pl, op, n));
		err = plan_conv(pl, l, cx, &e->a);
		err = err ? : plan_conv(pl, r, cx, &e->b);
		if (err)
			return err;
		break;
	}
	default:
		return query_errorf(pl->q, &n->loc, "internal: cannot plan this expression");
	}
	*out = e;
	return 0;
}
