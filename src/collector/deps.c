// SPDX-License-Identifier: MIT
/*
 * The service dependency graph, as Zipkin's /api/v2/dependencies answers
 * it: links {parent, child, callCount, errorCount}, computed per trace by
 * Zipkin's own algorithm (zipkin2.internal.DependencyLinker over the tree
 * of zipkin2.internal.SpanNode.Builder, with Trace.merge's clean-up first;
 * read openzipkin/zipkin for the original, this is a C reimplementation):
 *
 * 1. Clean-up: spans of one id sent in pieces (same shared flag, local
 *    endpoints that do not disagree: service, address, port) become one;
 *    a SERVER span after a CLIENT span of its id is shared, and a shared
 *    span with no parent takes the client's.
 * 2. Tree: a span's node is keyed by its id, a shared span's by (id, its
 *    local endpoint: service, IPv4, IPv6 and port, all equal as in
 *    Endpoint.equals); a shared span's parent is the client of its id; a
 *    span whose parent id is a shared span on its own endpoint hangs under
 *    that server half, else under the parent id's span (so a client span
 *    that names its service but not the port its server half gave hangs
 *    under the caller's client half, as in Zipkin); the first span with no
 *    parent is the root and every span whose parent is missing hangs under
 *    the root (or under a synthetic root when there is none).
 * 3. Links, breadth first: a CLIENT span with children is skipped (the
 *    server names the call); a span of no kind with both services counts
 *    as a CLIENT; SERVER/CONSUMER link remote -> local (the root SERVER
 *    only with a remote service), CLIENT/PRODUCER local -> remote;
 *    messaging spans link to and from their broker as they are.  For RPC,
 *    the nearest ancestor with a kind names the caller of a SERVER (or of
 *    a span without a remote service), and a CLIENT on another service
 *    than that ancestor also back-fills the missing link ancestor ->
 *    client; a server whose parent is the client half of its call counts
 *    that client's error.  A link is an error when its span has an
 *    "error" tag.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/deps.h"
#include "common/grow.h"
#include "store/store.h"

struct dspan {
	uint64_t id, parent_id;
	uint8_t kind, error, shared;
	char *svc, *remote;
	char *ipv4, *ipv6;           /* the local endpoint's address, NULL: none */
	uint16_t port;               /* 0: none */
	/* the tree */
	int up;                      /* parent node, -1: none (a root child) */
	int first, last, next;       /* children, siblings; -1: none */
};

struct link {
	char *parent, *child;
	uint64_t calls, errors;
};

/* A node key of SpanNode.Builder: an id, or (id, shared, the local
 * endpoint of span ep; NULL: none). */
struct dkey {
	uint64_t id;
	uint8_t shared;
	const struct dspan *ep;
};

/* An open-addressing map of dkey -> int. */
struct dmap {
	struct dkey *k;
	int *v;
	size_t cap;
};

struct deps {
	uint64_t lo;
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

static int streq0(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static int has_ep(const struct dspan *s)
{
	return s->svc || s->ipv4 || s->ipv6 || s->port;
}

/* Endpoint.equals() of the local endpoints of a and b (NULL: none). */
static int ep_eq(const struct dspan *a, const struct dspan *b)
{
	if (!a || !b)
		return a == b;
	return streq0(a->svc, b->svc) && streq0(a->ipv4, b->ipv4) && streq0(a->ipv6, b->ipv6) &&
	       a->port == b->port;
}

static uint64_t hash_str(uint64_t h, const char *p)
{
	for (; p && *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h * 0x100000001b3ull;
}

/* ---- the key map -------------------------------------------------------- */

static size_t dkey_hash(const struct dkey *k)
{
	uint64_t h = k->id * 0x9e3779b97f4a7c15ull ^ k->shared;

	if (k->ep)
		h = hash_str(hash_str(hash_str(h ^ k->ep->port, k->ep->svc), k->ep->ipv4),
			     k->ep->ipv6);
	return (size_t)(h ^ h >> 29);
}

static int dkey_eq(const struct dkey *a, const struct dkey *b)
{
	return a->id == b->id && a->shared == b->shared && ep_eq(a->ep, b->ep);
}

static int dmap_init(struct dmap *m, size_t n)
{
	m->cap = 16;
	while (m->cap < 4 * n)
		m->cap *= 2;
	m->k = calloc(m->cap, sizeof(*m->k));
	m->v = calloc(m->cap, sizeof(*m->v));
	return m->k && m->v ? 0 : -ENOMEM;
}

static void dmap_free(struct dmap *m)
{
	free(m->k);
	free(m->v);
}

/* The slot of k: holding it, or the empty one where it goes (ids are never
 * 0, so id 0 marks an empty slot; the map is never more than 1/2 full). */
static size_t dmap_slot(const struct dmap *m, const struct dkey *k)
{
	size_t i = dkey_hash(k) & (m->cap - 1);

	while (m->k[i].id && !dkey_eq(&m->k[i], k))
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int dmap_get(const struct dmap *m, const struct dkey *k)
{
	size_t i;

	if (!k->id)
		return -1;
	i = dmap_slot(m, k);
	return m->k[i].id ? m->v[i] : -1;
}

static void dmap_put(struct dmap *m, const struct dkey *k, int v)
{
	size_t i = dmap_slot(m, k);

	m->k[i] = *k;
	m->v[i] = v;
}

static struct dkey key_of(uint64_t id, int shared, const struct dspan *ep)
{
	/* createKey(): an id alone unless shared */
	return (struct dkey){ id, (uint8_t)!!shared, shared && ep && has_ep(ep) ? ep : NULL };
}

/* ---- links -------------------------------------------------------------- */

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
	if (array_grow((void **)&d->l, d->nl, &d->capl, sizeof(*d->l), 32)) {
		d->oom = 1;
		return;
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

/* ---- 1. Trace.merge ----------------------------------------------------- */

/* Strings in order, NULL last. */
static int cmp_null_last(const char *a, const char *b)
{
	if (!a || !b)
		return !a ? (b ? 1 : 0) : -1;
	return strcmp(a, b);
}

/* CLEANUP_COMPARATOR: by id, client halves first and shared last, then
 * spans without a local endpoint first, then by service, IPv4, IPv6. */
static int cleanup_cmp(const void *x, const void *y)
{
	const struct dspan *a = x, *b = y;
	int ac = a->kind == SPAN_KIND_CLIENT, bc = b->kind == SPAN_KIND_CLIENT, c;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if (a->shared != b->shared)
		return a->shared ? 1 : -1;
	if (!a->shared && ac != bc)
		return ac ? -1 : 1;
	if (has_ep(a) != has_ep(b))
		return has_ep(a) ? 1 : -1;
	if ((c = cmp_null_last(a->svc, b->svc)) || (c = cmp_null_last(a->ipv4, b->ipv4)))
		return c;
	return cmp_null_last(a->ipv6, b->ipv6);
}

static void take(char **dst, char **src)
{
	if (!*dst) {
		*dst = *src;
		*src = NULL;
	}
}

/* EndpointTracker.tryMerge(): b's local endpoint can be a piece of a's
 * (no field present in both differs). */
static int ep_agrees(const struct dspan *a, const struct dspan *b)
{
	return (!a->svc || !b->svc || !strcmp(a->svc, b->svc)) &&
	       (!a->ipv4 || !b->ipv4 || !strcmp(a->ipv4, b->ipv4)) &&
	       (!a->ipv6 || !b->ipv6 || !strcmp(a->ipv6, b->ipv6)) &&
	       (!a->port || !b->port || a->port == b->port);
}

static void dspan_free(struct dspan *s)
{
	free(s->svc);
	free(s->remote);
	free(s->ipv4);
	free(s->ipv6);
}

static size_t merge_pieces(struct dspan *s, size_t n)
{
	size_t out = 0;

	qsort(s, n, sizeof(*s), cleanup_cmp);
	for (size_t i = 0; i < n; i++) {
		struct dspan *cur = &s[out];

		if (i != out)
			*cur = s[i];
		/* the pieces of one span: same id and shared flag, endpoints that agree */
		while (i + 1 < n && s[i + 1].id == cur->id && s[i + 1].shared == cur->shared &&
		       ep_agrees(cur, &s[i + 1])) {
			struct dspan *nx = &s[++i];

			take(&cur->svc, &nx->svc);
			take(&cur->remote, &nx->remote);
			take(&cur->ipv4, &nx->ipv4);
			take(&cur->ipv6, &nx->ipv6);
			if (!cur->port)
				cur->port = nx->port;
			if (!cur->kind)
				cur->kind = nx->kind;
			if (!cur->parent_id)
				cur->parent_id = nx->parent_id;
			cur->error |= nx->error;
			dspan_free(nx);
		}
		if (out && s[out - 1].id == cur->id) {
			const struct dspan *last = &s[out - 1];

			if (last->kind == SPAN_KIND_CLIENT && cur->kind == SPAN_KIND_SERVER)
				cur->shared = 1;
			if (cur->shared && !cur->parent_id)
				cur->parent_id = last->parent_id;
		}
		out++;
	}
	return out;
}

/* ---- 2. SpanNode.Builder ------------------------------------------------ */

static void add_child(struct dspan *s, int parent, int child)
{
	s[child].up = parent;
	s[child].next = -1;
	if (parent < 0)
		return;
	if (s[parent].last >= 0)
		s[s[parent].last].next = child;
	else
		s[parent].first = child;
	s[parent].last = child;
}

/*
 * Link every span to its parent node (s[i].up; -1 with *root the root's
 * index, or -1 for a synthetic root).  The spans whose parent is the
 * (synthetic) root get up = -1 and are listed in top[] (*ntop).
 */
/* spanToParent: child key -> parent key in insertion order (a
 * LinkedHashMap), entries marked removed. */
struct s2p {
	struct dkey *ck, *pk;
	char *gone;
	size_t n;
	struct dmap at;             /* child key -> entry */
};

static void s2p_put(struct s2p *m, const struct dkey *c, const struct dkey *p)
{
	int e = dmap_get(&m->at, c);

	if (e < 0) {
		e = (int)m->n++;
		m->ck[e] = *c;
		dmap_put(&m->at, c, e);
	}
	m->pk[e] = *p;
	m->gone[e] = 0;
}

static int build_tree(struct dspan *s, size_t n, int *root, int *top, size_t *ntop)
{
	struct s2p m = { calloc(n * 2 + 1, sizeof(*m.ck)), calloc(n * 2 + 1, sizeof(*m.pk)),
			 calloc(n * 2 + 1, 1), 0, { 0 } };
	struct dmap node = { 0 };   /* keyToNode */
	int ret = -ENOMEM;

	*root = -1;
	*ntop = 0;
	if (!m.ck || !m.pk || !m.gone || dmap_init(&m.at, 2 * n) || dmap_init(&node, 2 * n))
		goto out;
	/* index() */
	for (size_t i = 0; i < n; i++) {
		struct dkey c = key_of(s[i].id, s[i].shared, &s[i]);
		struct dkey p = key_of(s[i].shared ? s[i].id : s[i].parent_id, 0, NULL);

		s2p_put(&m, &c, &p);
	}
	/* process() */
	for (size_t i = 0; i < n; i++) {
		struct dkey key = key_of(s[i].id, s[i].shared, &s[i]);
		struct dkey noep = has_ep(&s[i]) ? key_of(s[i].id, s[i].shared, NULL) : key;
		struct dkey parent = { 0 };
		int e;

		s[i].up = s[i].first = s[i].last = s[i].next = -1;
		if (s[i].shared) {
			parent = key_of(s[i].id, 0, NULL);
		} else if (s[i].parent_id) {
			/* the child of a shared server span on our own endpoint? */
			parent = key_of(s[i].parent_id, 1, &s[i]);
			if (dmap_get(&m.at, &parent) >= 0)
				s2p_put(&m, &noep, &parent);
			else
				parent = key_of(s[i].parent_id, 0, NULL);
		}
		if (!parent.id && *root < 0) {
			*root = (int)i;
			if ((e = dmap_get(&m.at, &noep)) >= 0)
				m.gone[e] = 1;
		} else if (s[i].shared) {
			dmap_put(&node, &key, (int)i);
			dmap_put(&node, &noep, (int)i);
		} else {
			dmap_put(&node, &noep, (int)i);
		}
	}
	/* attach, in the order of spanToParent */
	for (size_t e = 0; e < m.n; e++) {
		int c = m.gone[e] ? -1 : dmap_get(&node, &m.ck[e]);
		int p = dmap_get(&node, &m.pk[e]);

		if (c < 0 || s[c].up >= 0 || (int)c == *root)
			continue; /* a key of no node, or a node already placed */
		if (p < 0) {
			if (*root >= 0)
				add_child(s, *root, c);
			else
				top[(*ntop)++] = c;
		} else if (p != c) {
			add_child(s, p, c);
		}
	}
	ret = 0;
out:
	dmap_free(&m.at);
	dmap_free(&node);
	free(m.ck);
	free(m.pk);
	free(m.gone);
	return ret;
}

/* ---- 3. DependencyLinker ------------------------------------------------ */

static const struct dspan *remote_ancestor(const struct dspan *s, int i)
{
	for (int a = s[i].up; a >= 0; a = s[a].up)
		if (s[a].kind)
			return &s[a];
	return NULL;
}

static void link_span(struct deps *d, const struct dspan *s, int i, int root)
{
	const struct dspan *cur = &s[i], *anc;
	const char *parent, *child;
	uint8_t kind = cur->kind;
	int error = cur->error;

	if (kind == SPAN_KIND_CLIENT && cur->first >= 0)
		return; /* the server names the call */
	if (!kind) {
		if (!cur->svc || !cur->remote)
			return; /* a local span */
		kind = SPAN_KIND_CLIENT;
	}
	if (kind == SPAN_KIND_SERVER || kind == SPAN_KIND_CONSUMER) {
		child = cur->svc;
		parent = cur->remote;
		if (i == root && !parent)
			return; /* the root's client is unknown */
	} else {
		parent = cur->svc;
		child = cur->remote;
	}
	if (kind == SPAN_KIND_PRODUCER || kind == SPAN_KIND_CONSUMER) {
		if (parent && child)
			link_add(d, parent, child, error);
		return;
	}
	anc = remote_ancestor(s, i);
	if (anc && anc->svc) {
		if (kind == SPAN_KIND_CLIENT && cur->svc && strcmp(anc->svc, cur->svc))
			link_add(d, anc->svc, cur->svc, 0); /* the missing link to the client */
		if (kind == SPAN_KIND_SERVER || !parent)
			parent = anc->svc;
		if (!error && anc->kind == SPAN_KIND_CLIENT && cur->parent_id &&
		    cur->parent_id == anc->id)
			error = anc->error;
	}
	if (parent && child)
		link_add(d, parent, child, error);
}

static void trace_done(struct deps *d)
{
	size_t n = merge_pieces(d->s, d->n), ntop = 0, head = 0, tail = 0;
	int *queue = malloc(sizeof(*queue) * (n + 1)), *top = malloc(sizeof(*top) * (n + 1));
	int root;

	if (!queue || !top || build_tree(d->s, n, &root, top, &ntop)) {
		d->oom = 1;
		goto out;
	}
	/* breadth first from the root, or from the synthetic root's children */
	if (root >= 0)
		queue[tail++] = root;
	for (size_t i = 0; i < ntop; i++)
		queue[tail++] = top[i];
	while (head < tail) {
		int i = queue[head++];

		for (int c = d->s[i].first; c >= 0 && tail < n; c = d->s[c].next)
			queue[tail++] = c;
		link_span(d, d->s, i, root);
	}
out:
	free(queue);
	free(top);
	for (size_t i = 0; i < n; i++)
		dspan_free(&d->s[i]);
	d->n = 0;
}

/* ---- the scan ----------------------------------------------------------- */

static int on_row(void *ctx, const struct store_row *r)
{
	struct deps *d = ctx;
	struct dspan *s;

	/* one trace per low id half: Zipkin ignores the high half here */
	if (d->have && r->trace_lo != d->lo)
		trace_done(d);
	d->have = 1;
	d->lo = r->trace_lo;
	if (array_grow((void **)&d->s, d->n, &d->cap, sizeof(*d->s), 64))
		return -ENOMEM;
	s = &d->s[d->n++];
	memset(s, 0, sizeof(*s));
	s->id = r->id;
	s->parent_id = r->parent_id;
	s->kind = r->kind;
	s->error = r->error;
	s->shared = r->shared;
	s->svc = dup_zs(r->service);
	s->remote = dup_zs(r->remote_service);
	s->ipv4 = dup_zs(r->ipv4);
	s->ipv6 = dup_zs(r->ipv6);
	s->port = r->port;
	return d->oom ? -ENOMEM : 0;
}

static int link_cmp(const void *x, const void *y)
{
	const struct link *a = x, *b = y;
	int c = strcmp(a->parent, b->parent);

	return c ? c : strcmp(a->child, b->child);
}

json_t *deps_json(struct store_reader *r, uint64_t from_us, uint64_t to_us, int *ret)
{
	struct deps d = { 0 };
	json_t *a = NULL;

	*ret = store__scan_traces(r, from_us, to_us, on_row, &d);
	trace_done(&d); /* the last trace (and its strings, on error too) */
	if (!*ret && d.oom)
		*ret = -ENOMEM;
	if (!*ret) {
		a = json_array();
		if (d.nl > 1)
			qsort(d.l, d.nl, sizeof(*d.l), link_cmp);
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
