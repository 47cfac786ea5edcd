// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 span array -> the tree behind `fay traces show` and `ls`.
 *
 * Parent links follow Zipkin's own rule for RPC spans that share one span
 * id (a client span and the "shared" server span of the same call): the
 * shared half hangs under the client half, and children that name that id
 * as parent hang under the server half, which did the work.  A parentId
 * that no span of the trace carries makes an orphan: it is shown as a
 * root, marked.  A cycle (corrupt data) is broken where it is met.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/traces.h"

static const char *str_field(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Zipkin times are JSON integers; tolerate reals from other writers. */
static int u64_field(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 1;
	}
	if (json_is_real(v) && json_real_value(v) >= 0) {
		*out = (uint64_t)json_real_value(v);
		return 1;
	}
	return 0;
}

/* Annotations by time; equal times keep the order they were recorded in
 * (a stable insertion sort: a span has a handful). */
static void sort_annots(struct tr_annot *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct tr_annot x = a[i];
		size_t j = i;

		for (; j > 0 && a[j - 1].ts > x.ts; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

static int cmp_tag(const void *a, const void *b)
{
	const struct tr_tag *x = a, *y = b;

	return strcmp(x->key, y->key);
}

/* Fill one span from its JSON object; 0 or -EINVAL/-ENOMEM with @err. */
static int span_parse(struct tr_span *s, json_t *o, size_t i,
		      char *err, size_t errlen)
{
	json_t *ep, *arr, *tags, *v;
	const char *key;
	size_t j;

	if (!json_is_object(o)) {
		snprintf(err, errlen, "span %zu: not a JSON object", i);
		return -EINVAL;
	}
	s->id = str_field(o, "id");
	if (!s->id || !*s->id) {
		snprintf(err, errlen, "span %zu: id: missing", i);
		return -EINVAL;
	}
	s->parent_id = str_field(o, "parentId");
	if (s->parent_id && !*s->parent_id)
		s->parent_id = NULL;
	s->name = str_field(o, "name");
	if (!s->name)
		s->name = "";
	s->kind = str_field(o, "kind");
	s->has_ts = u64_field(o, "timestamp", &s->ts);
	s->has_dur = u64_field(o, "duration", &s->dur);
	s->shared = json_is_true(json_object_get(o, "shared"));
	s->service = "";
	ep = json_object_get(o, "localEndpoint");
	if (json_is_object(ep)) {
		if (str_field(ep, "serviceName"))
			s->service = str_field(ep, "serviceName");
		s->ip = str_field(ep, "ipv4");
		if (!s->ip)
			s->ip = str_field(ep, "ipv6");
		v = json_object_get(ep, "port");
		s->port = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	}
	ep = json_object_get(o, "remoteEndpoint");
	if (json_is_object(ep))
		s->remote_service = str_field(ep, "serviceName");

	arr = json_object_get(o, "annotations");
	if (json_is_array(arr) && json_array_size(arr)) {
		s->annots = calloc(json_array_size(arr), sizeof(*s->annots));
		if (!s->annots)
			return -ENOMEM;
		json_array_foreach(arr, j, v) {
			struct tr_annot *a = &s->annots[s->nannots];

			a->value = str_field(v, "value");
			if (!a->value || !u64_field(v, "timestamp", &a->ts)) {
				snprintf(err, errlen,
					 "span %zu: annotations[%zu]: needs timestamp and value",
					 i, j);
				return -EINVAL;
			}
			s->nannots++;
		}
		sort_annots(s->annots, s->nannots);
	}

	tags = json_object_get(o, "tags");
	if (json_is_object(tags) && json_object_size(tags)) {
		s->tags = calloc(json_object_size(tags), sizeof(*s->tags));
		if (!s->tags)
			return -ENOMEM;
		json_object_foreach(tags, key, v) {
			struct tr_tag *t = &s->tags[s->ntags];

			t->key = key;
			t->value = json_is_string(v) ? json_string_value(v) : "";
			if (!strcmp(key, "error"))
				s->error = 1;
			s->ntags++;
		}
		qsort(s->tags, s->ntags, sizeof(*s->tags), cmp_tag);
	}
	return 0;
}

/* Span indexes sorted by id, for the parent look-ups. */
struct id_index {
	const struct tr_span *spans;
	size_t *ix;
	size_t n;
};

static const struct tr_span *sort_spans;

static int cmp_by_id(const void *a, const void *b)
{
	const struct tr_span *x = &sort_spans[*(const size_t *)a];
	const struct tr_span *y = &sort_spans[*(const size_t *)b];
	int c = strcmp(x->id, y->id);

	if (c)
		return c;
	/* Same id: the non-shared (client) half first. */
	return x->shared - y->shared;
}

/* First position in idx->ix whose span has id @id, or idx->n. */
static size_t id_lower(const struct id_index *idx, const char *id)
{
	size_t lo = 0, hi = idx->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(idx->spans[idx->ix[mid]].id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The span with id @id, preferring the shared (server) half when
 * @want_shared, else the non-shared one; -1 if none, or if the only match
 * is @self.
 */
static long find_id(const struct id_index *idx, const char *id,
		    int want_shared, size_t self)
{
	long best = -1;

	for (size_t p = id_lower(idx, id);
	     p < idx->n && !strcmp(idx->spans[idx->ix[p]].id, id); p++) {
		size_t k = idx->ix[p];

		if (k == self)
			continue;
		if (best < 0 || idx->spans[k].shared == want_shared)
			best = (long)k;
	}
	return best;
}

static void link_parents(struct tr_trace *t, const struct id_index *idx)
{
	for (size_t i = 0; i < t->nspans; i++) {
		struct tr_span *s = &t->spans[i];
		long p = -1;

		if (s->shared) {
			p = find_id(idx, s->id, 0, i);
			if (p >= 0 && t->spans[p].shared)
				p = -1;
		}
		if (p < 0 && s->parent_id) {
			p = find_id(idx, s->parent_id, 1, i);
			if (p < 0)
				s->orphan = 1;
		}
		s->parent = p;
	}
}

static const struct tr_span *order_spans;

/* Children and roots: by start time (spans without one last), then name. */
static int cmp_by_start(const void *a, const void *b)
{
	const struct tr_span *x = &order_spans[*(const size_t *)a];
	const struct tr_span *y = &order_spans[*(const size_t *)b];
	int c;

	if (x->has_ts != y->has_ts)
		return y->has_ts - x->has_ts;
	if (x->has_ts && x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	/* A client half before its shared server half. */
	if (x->shared != y->shared)
		return x->shared - y->shared;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return strcmp(x->id, y->id);
}

/*
 * Depth-first walk from the roots, children by start time; iterative so a
 * deep trace cannot exhaust the stack.  Spans on a parent cycle are never
 * reached from a root: each such cycle is cut at its earliest span, which
 * becomes a root, and the walk goes on.
 */
static int tree_order(struct tr_trace *t)
{
	size_t n = t->nspans, *byparent, *first, *stack, nout = 0, sp = 0;
	char *seen;
	int ret = -ENOMEM;

	byparent = calloc(n ? n : 1, sizeof(size_t));
	first = calloc(n + 3, sizeof(size_t));
	stack = calloc(n ? n : 1, sizeof(size_t));
	seen = calloc(n ? n : 1, 1);
	if (!byparent || !first || !stack || !seen)
		goto out;

	/* Spans sorted by (parent, start): bucket k + 1 for parent k, 0 for roots. */
	for (size_t i = 0; i < n; i++)
		byparent[i] = i;
	order_spans = t->spans;
	qsort(byparent, n, sizeof(size_t), cmp_by_start);
	for (size_t i = 0; i < n; i++)
		first[t->spans[i].parent + 2]++;
	for (size_t k = 1; k < n + 3; k++)
		first[k] += first[k - 1];
	/* first[k] is now the end of bucket k - 1; fill back to front. */
	{
		size_t *tmp = calloc(n ? n : 1, sizeof(size_t));

		if (!tmp)
			goto out;
		for (size_t i = n; i-- > 0;) {
			size_t s = byparent[i];

			tmp[--first[t->spans[s].parent + 2]] = s;
		}
		memcpy(byparent, tmp, n * sizeof(size_t));
		free(tmp);
	}
	/* Bucket b (parent b - 1; 0 = roots) is byparent[first[b + 1] .. first[b + 2]). */

	for (;;) {
		size_t root = n;

		/* The next root: a real one, else the earliest unseen span. */
		for (size_t p = first[1]; p < first[2]; p++)
			if (!seen[byparent[p]]) {
				root = byparent[p];
				break;
			}
		if (root == n)
			for (size_t p = 0; p < n; p++)
				if (!seen[byparent[p]]) {
					root = byparent[p];
					t->spans[root].parent = -1;
					t->spans[root].orphan = 1;
					break;
				}
		if (root == n)
			break;
		t->spans[root].depth = 0;
		seen[root] = 1;
		stack[sp++] = root;
		while (sp) {
			size_t s = stack[--sp];
			size_t b = s + 1;

			t->order[nout++] = s;
			/* Push children in reverse so the earliest comes out first. */
			for (size_t p = first[b + 2]; p-- > first[b + 1];) {
				size_t c = byparent[p];

				if (seen[c])
					continue;
				seen[c] = 1;
				t->spans[c].depth = t->spans[s].depth + 1;
				stack[sp++] = c;
			}
		}
	}
	ret = nout == n ? 0 : -EINVAL;
out:
	free(byparent);
	free(first);
	free(stack);
	free(seen);
	return ret;
}

static void axis_and_services(struct tr_trace *t)
{
	int have = 0;

	for (size_t i = 0; i < t->nspans; i++) {
		const struct tr_span *s = &t->spans[i];
		uint64_t lo = UINT64_MAX, hi = 0;

		if (s->has_ts) {
			lo = s->ts;
			hi = s->ts + (s->has_dur ? s->dur : 0);
		}
		for (size_t j = 0; j < s->nannots; j++) {
			if (s->annots[j].ts < lo)
				lo = s->annots[j].ts;
			if (s->annots[j].ts > hi)
				hi = s->annots[j].ts;
		}
		if (lo == UINT64_MAX)
			continue;
		if (!have || lo < t->t0)
			t->t0 = lo;
		if (!have || hi > t->t1)
			t->t1 = hi;
		have = 1;
	}

	for (size_t k = 0; k < t->nspans; k++) {
		struct tr_span *s = &t->spans[t->order[k]];
		size_t j;

		for (j = 0; j < t->nservices; j++)
			if (!strcmp(t->services[j], s->service))
				break;
		if (j == t->nservices)
			t->services[t->nservices++] = s->service;
		s->svc = (int)j;
		if (s->error)
			t->error = 1;
	}

	/* The root: the first span in tree order without a parentId, else the first. */
	t->root = t->nspans ? (long)t->order[0] : -1;
	for (size_t k = 0; k < t->nspans; k++)
		if (!t->spans[t->order[k]].parent_id) {
			t->root = (long)t->order[k];
			break;
		}
}

struct tr_trace *tr_trace_new(json_t *spans, char *err, size_t errlen)
{
	struct tr_trace *t;
	struct id_index idx = { 0 };
	json_t *o;
	size_t i;
	int ret = -EINVAL;

	if (errlen)
		err[0] = '\0';
	if (!json_is_array(spans)) {
		snprintf(err, errlen, "a trace must be a JSON array of spans");
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->json = json_incref(spans);
	t->nspans = json_array_size(spans);
	t->root = -1;
	if (!t->nspans) {
		snprintf(err, errlen, "the trace has no spans");
		goto err_out;
	}
	ret = -ENOMEM;
	t->spans = calloc(t->nspans, sizeof(*t->spans));
	t->order = calloc(t->nspans, sizeof(*t->order));
	t->services = calloc(t->nspans, sizeof(*t->services));
	idx.ix = calloc(t->nspans, sizeof(*idx.ix));
	if (!t->spans || !t->order || !t->services || !idx.ix)
		goto err_out;

	json_array_foreach(spans, i, o) {
		const char *tid;

		ret = span_parse(&t->spans[i], o, i, err, errlen);
		if (ret)
			goto err_out;
		tid = str_field(o, "traceId");
		if (!tid) {
			snprintf(err, errlen, "span %zu: traceId: missing", i);
			ret = -EINVAL;
			goto err_out;
		}
		if (!t->trace_id)
			t->trace_id = tid;
		idx.ix[i] = i;
	}
	idx.spans = t->spans;
	idx.n = t->nspans;
	sort_spans = t->spans;
	qsort(idx.ix, idx.n, sizeof(*idx.ix), cmp_by_id);
	link_parents(t, &idx);
	ret = tree_order(t);
	if (ret) {
		snprintf(err, errlen, "cannot order the spans: %s", strerror(-ret));
		goto err_out;
	}
	axis_and_services(t);
	free(idx.ix);
	return t;

err_out:
	free(idx.ix);
	tr_trace_free(t);
	errno = -ret;
	return NULL;
}

void tr_trace_free(struct tr_trace *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->spans && i < t->nspans; i++) {
		free(t->spans[i].annots);
		free(t->spans[i].tags);
	}
	free(t->spans);
	free(t->order);
	free(t->services);
	json_decref(t->json);
	free(t);
}

json_t *tr_summary_json(const struct tr_trace *t)
{
	const struct tr_span *r = t->root >= 0 ? &t->spans[t->root] : NULL;
	json_t *o = json_object(), *svc = json_array();

	if (!o || !svc)
		goto err_out;
	for (size_t i = 0; i < t->nservices; i++)
		if (json_array_append_new(svc, json_string(t->services[i])))
			goto err_out;
	if (json_object_set_new(o, "traceId", json_string(t->trace_id)) ||
	    json_object_set_new(o, "timestamp", json_integer((json_int_t)t->t0)) ||
	    json_object_set_new(o, "duration", json_integer((json_int_t)(t->t1 - t->t0))) ||
	    json_object_set_new(o, "rootService", json_string(r ? r->service : "")) ||
	    json_object_set_new(o, "rootName", json_string(r ? r->name : "")) ||
	    json_object_set_new(o, "spanCount", json_integer((json_int_t)t->nspans)) ||
	    json_object_set_new(o, "services", svc) ||
	    json_object_set_new(o, "error", json_boolean(t->error))) {
		svc = NULL;
		goto err_out;
	}
	return o;
err_out:
	json_decref(svc);
	json_decref(o);
	errno = ENOMEM;
	return NULL;
}
