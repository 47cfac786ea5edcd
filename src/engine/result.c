// SPDX-License-Identifier: MIT
/*
 * Aggregated results once read: ordering and limiting (what runs at the
 * root of a query: on this host for a local query, at the top of the
 * collector tree for a cluster query), and freeing.
 *
 * Order: by the query's 'order by' value (desc when asked), ties and
 * queries without one by the group key (string keys bytewise up to the
 * NUL, integers signed), so output is deterministic whatever order the
 * CPUs and hosts were merged in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

struct srow {
	struct engine_row r;
	struct plan_val ov;
};

static int cmp_val(const struct plan_val *a, const struct plan_val *b)
{
	if (a->type == VT_STR || b->type == VT_STR) {
		size_t n = a->len < b->len ? a->len : b->len;
		int c = memcmp(a->s, b->s, n);

		return c ? c : (a->len > b->len) - (a->len < b->len);
	}
	return (a->i > b->i) - (a->i < b->i);
}

static int cmp_keys(const struct plan *p, const unsigned char *a, const unsigned char *b)
{
	for (int i = 0; i < p->nkeys; i++) {
		const struct plan_key *k = &p->keys[i];
		int c;

		if (k->e->type == VT_STR) {
			c = strncmp((const char *)a + k->offset, (const char *)b + k->offset,
				    (size_t)k->size);
		} else {
			int64_t x, y;

			memcpy(&x, a + k->offset, 8);
			memcpy(&y, b + k->offset, 8);
			c = (x > y) - (x < y);
		}
		if (c)
			return c;
	}
	return 0;
}

static int cmp_rows(const void *x, const void *y, void *arg)
{
	const struct plan *p = arg;
	const struct srow *a = x, *b = y;
	int c = 0;

	if (p->order) {
		c = cmp_val(&a->ov, &b->ov);
		if (p->order_desc)
			c = -c;
	}
	return c ? c : cmp_keys(p, a->r.key, b->r.key);
}

int engine_result_order(const struct plan *p, struct engine_result *res)
{
	size_t n = res->nrows, keep;
	struct srow *s;

	if (n < 2 && !(p->limit && n > p->limit))
		return 0;
	s = calloc(n, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		s[i].r = res->rows[i];
		if (p->order && plan_eval(p, p->order, s[i].r.key, s[i].r.val, &s[i].ov))
			s[i].ov.i = 0;
	}
	qsort_r(s, n, sizeof(*s), cmp_rows, (void *)p);
	keep = p->limit && n > p->limit ? (size_t)p->limit : n;
	for (size_t i = 0; i < n; i++) {
		if (i < keep) {
			res->rows[i] = s[i].r;
		} else {
			free(s[i].r.key);
			free(s[i].r.val);
		}
	}
	res->nrows = keep;
	free(s);
	return 0;
}

void engine_result_clear(struct engine_result *res)
{
	engine_cats_free(res->cats);
	for (size_t i = 0; i < res->nrows; i++) {
		free(res->rows[i].key);
		free(res->rows[i].val);
	}
	free(res->rows);
	memset(res, 0, sizeof(*res));
}
