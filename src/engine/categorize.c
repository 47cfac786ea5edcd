// SPDX-License-Identifier: MIT
/*
 * categorize: Fay's automatic analysis of cluster behaviour over a
 * query's answer (what runs at the root, beside ordering: on this host
 * for a local query, at the top collector for a cluster query).
 *
 * Vectors.  The pivot form (categorize host by call [using n] into K)
 * makes one vector per entity, one dimension per distinct feature value,
 * the value column summed over the rows of each (entity, feature) pair;
 * each vector is then divided by its sum, so an entity is described by
 * its mix (41% read, 30% openat ...) and a busy host and a quiet one that
 * do the same things fall together; an entity with nothing stays at the
 * origin.  The vector form (categorize svc by p50, p99 into K) takes each
 * column as a dimension and standardizes it over the entities (z-score;
 * a column that does not vary is 0), so that no unit outweighs another.
 *
 * Clustering: engine/kmeans.h over the entities sorted by name.
 * Labels: 1..K.  The first window numbers categories by their first
 * entity; later ones keep a category's number when it keeps most of its
 * members (greedy on the overlap with the previous window's categories),
 * so that "changed" means an entity moved, not that numbers were shuffled.
 * Distinguishing features of a category: the features whose centroid
 * value most exceeds the mean over all entities (at most CAT_TOP).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "engine/kmeans.h"

/* A column of a row as text: strings up to their NUL, numbers in decimal. */
static char *cell_text(const struct plan *p, int col, const struct engine_row *r)
{
	struct plan_val v;
	char buf[32];

	if (plan_eval(p, p->cols[col].e, r->key, r->val, &v))
		return strdup("?");
	if (v.type == VT_STR)
		return strndup(v.s, strnlen(v.s, v.len));
	snprintf(buf, sizeof(buf), "%" PRId64, v.i);
	return strdup(buf);
}

static int64_t cell_int(const struct plan *p, int col, const struct engine_row *r)
{
	struct plan_val v;

	if (plan_eval(p, p->cols[col].e, r->key, r->val, &v) || v.type != VT_INT)
		return 0;
	return v.i;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted distinct copies of names[0..n) into *out (the strings move). */
static size_t distinct(char **names, size_t n, char ***out)
{
	size_t m = 0;

	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (m && !strcmp(names[m - 1], names[i])) {
			free(names[i]);
			continue;
		}
		names[m++] = names[i];
	}
	*out = names;
	return m;
}

static size_t find(char *const *names, size_t n, const char *s)
{
	char *const *hit = bsearch(&s, names, n, sizeof(*names), cmp_str);

	return hit ? (size_t)(hit - names) : n;
}

void engine_cats_free(struct engine_cats *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->entity[i]);
	for (size_t j = 0; j < c->nfeat; j++)
		free(c->feat[j]);
	free(c->entity);
	free(c->feat);
	free(c->label);
	free(c->prev);
	free(c->centroid);
	free(c->size);
	free(c->top);
	free(c);
}

/* The matrix: entities by features, as the form says (see above). */
static int build(const struct plan *p, const struct engine_result *res, struct engine_cats *c,
		 double **out)
{
	const struct ast_categorize *a = p->cat;
	size_t nr = res->nrows;
	char **names = calloc(nr + 1, sizeof(*names)), **feats = NULL;
	double *x;

	if (!names)
		return -ENOMEM;
	for (size_t r = 0; r < nr; r++)
		if (!(names[r] = cell_text(p, a->entity_col, &res->rows[r])))
			goto nomem;
	c->n = distinct(names, nr, &c->entity);
	names = NULL;
	if (a->pivot) {
		if (!(feats = calloc(nr + 1, sizeof(*feats))))
			goto nomem;
		for (size_t r = 0; r < nr; r++)
			if (!(feats[r] = cell_text(p, a->feat_col[0], &res->rows[r])))
				goto nomem;
		c->nfeat = distinct(feats, nr, &c->feat);
		feats = NULL;
	} else {
		if (!(c->feat = calloc((size_t)a->nfeat, sizeof(*c->feat))))
			goto nomem;
		c->nfeat = (size_t)a->nfeat;
		for (int j = 0; j < a->nfeat; j++)
			if (!(c->feat[j] = strdup(a->feat[j])))
				goto nomem;
	}
	x = calloc(c->n * c->nfeat + 1, sizeof(*x));
	if (!x)
		goto nomem;
	for (size_t r = 0; r < nr; r++) {
		char *en = cell_text(p, a->entity_col, &res->rows[r]);
		size_t i = en ? find(c->entity, c->n, en) : c->n;

		free(en);
		if (i == c->n)
			continue;
		if (a->pivot) {
			char *fn = cell_text(p, a->feat_col[0], &res->rows[r]);
			size_t j = fn ? find(c->feat, c->nfeat, fn) : c->nfeat;

			free(fn);
			if (j < c->nfeat)
				x[i * c->nfeat + j] += (double)cell_int(p, a->value_col, &res->rows[r]);
		} else {
			for (int j = 0; j < a->nfeat; j++)
				x[i * c->nfeat + (size_t)j] +=
					(double)cell_int(p, a->feat_col[j], &res->rows[r]);
		}
	}
	*out = x;
	return 0;
nomem:
	if (names)
		for (size_t r = 0; r < nr; r++)
			free(names[r]);
	if (feats)
		for (size_t r = 0; r < nr; r++)
			free(feats[r]);
	free(names);
	free(feats);
	return -ENOMEM;
}

static void normalize(const struct ast_categorize *a, double *x, size_t n, size_t d)
{
	if (a->pivot) {
		for (size_t i = 0; i < n; i++) {
			double s = 0;

			for (size_t j = 0; j < d; j++)
				s += x[i * d + j];
			if (s > 0)
				for (size_t j = 0; j < d; j++)
					x[i * d + j] /= s;
		}
		return;
	}
	for (size_t j = 0; j < d; j++) {
		double mean = 0, var = 0, sd;

		for (size_t i = 0; i < n; i++)
			mean += x[i * d + j];
		mean /= (double)n;
		for (size_t i = 0; i < n; i++)
			var += (x[i * d + j] - mean) * (x[i * d + j] - mean);
		sd = sqrt(var / (double)n);
		for (size_t i = 0; i < n; i++)
			x[i * d + j] = sd > 0 ? (x[i * d + j] - mean) / sd : 0;
	}
}

/* Numbers 1..k for the clusters of as[] (see above); map[m] is the
 * label of cluster m. */
static void relabel(const struct engine_cats *c, const int *as, int k, int *map)
{
	int *ov = calloc((size_t)k * (size_t)(k + 1), sizeof(*ov));
	bool used[QUERY_CAT_MAX_K + 1] = { false };
	size_t *cnt = calloc((size_t)k, sizeof(*cnt));

	for (int m = 0; m < k; m++)
		map[m] = 0;
	if (ov && cnt) {
		for (size_t i = 0; i < c->n; i++) {
			cnt[as[i]]++;
			if (c->prev[i] > 0 && c->prev[i] <= k)
				ov[as[i] * (k + 1) + c->prev[i]]++;
		}
		for (;;) {	/* the largest overlap first */
			int bm = -1, bl = 0, best = 0;

			for (int m = 0; m < k; m++) {
				if (map[m])
					continue;
				for (int l = 1; l <= k; l++)
					if (!used[l] && ov[m * (k + 1) + l] > best) {
						best = ov[m * (k + 1) + l];
						bm = m;
						bl = l;
					}
			}
			if (bm < 0)
				break;
			map[bm] = bl;
			used[bl] = true;
		}
	}
	for (int pass = 0; pass < 2; pass++)	/* non-empty clusters first */
		for (int m = 0; m < k; m++) {
			int l = 1;

			if (map[m] || (pass == 0 && cnt && !cnt[m]))
				continue;
			while (used[l])
				l++;
			map[m] = l;
			used[l] = true;
		}
	free(ov);
	free(cnt);
}

/* The distinguishing features of each category. */
static void top_features(struct engine_cats *c, const double *x)
{
	size_t d = c->nfeat;
	double *mean = calloc(d + 1, sizeof(*mean));

	for (size_t t = 0; t < (size_t)c->k * CAT_TOP; t++)
		c->top[t] = -1;
	if (!mean || !c->n)
		goto out;
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < d; j++)
			mean[j] += x[i * d + j] / (double)c->n;
	for (int l = 0; l < c->k; l++) {
		const double *cen = c->centroid + (size_t)l * d;

		if (!c->size[l])
			continue;
		for (int t = 0; t < CAT_TOP; t++) {
			int best = -1;

			for (size_t j = 0; j < d; j++) {
				bool taken = false;

				for (int u = 0; u < t; u++)
					taken |= c->top[l * CAT_TOP + u] == (int)j;
				/* what shows: a point of share, a tenth of a deviation */
				if (taken || !(cen[j] - mean[j] > (c->pivot ? 0.01 : 0.1)))
					continue;
				if (best < 0 || cen[j] - mean[j] > cen[best] - mean[best])
					best = (int)j;
			}
			c->top[l * CAT_TOP + t] = best;
		}
	}
out:
	free(mean);
}

int engine_result_categorize(const struct plan *p, struct engine_result *res,
			     struct engine_cats **prev)
{
	const struct ast_categorize *a = p->cat;
	struct engine_cats *c;
	struct kmeans_out ko = { 0 };
	double *x = NULL;
	int map[QUERY_CAT_MAX_K], err;

	if (!a)
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* into auto: room for the most, c->k is then the k chosen */
	c->k = a->k ? a->k : QUERY_CAT_AUTO_MAX_K;
	c->k_auto = !a->k;
	c->pivot = a->pivot;
	c->entity_col = a->entity_col;
	err = build(p, res, c, &x);
	if (err)
		goto fail;
	c->label = calloc(c->n + 1, sizeof(*c->label));
	c->prev = calloc(c->n + 1, sizeof(*c->prev));
	c->centroid = calloc((size_t)c->k * c->nfeat + 1, sizeof(*c->centroid));
	c->size = calloc((size_t)c->k, sizeof(*c->size));
	c->top = malloc((size_t)c->k * CAT_TOP * sizeof(*c->top));
	ko.assign = calloc(c->n + 1, sizeof(*ko.assign));
	ko.centroid = calloc((size_t)c->k * c->nfeat + 1, sizeof(*ko.centroid));
	ko.count = calloc((size_t)c->k, sizeof(*ko.count));
	err = -ENOMEM;
	if (!c->label || !c->prev || !c->centroid || !c->size || !c->top || !ko.assign ||
	    !ko.centroid || !ko.count)
		goto fail;
	for (size_t i = 0; *prev && i < c->n; i++) {
		size_t j = find((*prev)->entity, (*prev)->n, c->entity[i]);

		c->prev[i] = j < (*prev)->n ? (*prev)->label[j] : 0;
	}
	if (c->n && c->nfeat) {
		normalize(a, x, c->n, c->nfeat);
		if (c->k_auto) {
			err = kmeans_auto(x, c->n, c->nfeat, c->k, KMEANS_SEED, &ko,
					  &c->silhouette);
			if (err < 0)
				goto fail;
			c->k = err;
		} else {
			err = kmeans(x, c->n, c->nfeat, c->k, KMEANS_SEED, &ko);
			if (err)
				goto fail;
		}
	} else if (c->k_auto) {
		c->k = 1;
	}
	relabel(c, ko.assign, c->k, map);
	for (size_t i = 0; i < c->n; i++)
		c->label[i] = map[ko.assign[i]];
	for (int m = 0; m < c->k; m++) {
		c->size[map[m] - 1] = ko.count[m];
		memcpy(c->centroid + (size_t)(map[m] - 1) * c->nfeat,
		       ko.centroid + (size_t)m * c->nfeat, c->nfeat * sizeof(double));
	}
	top_features(c, x);
	engine_cats_free(*prev);
	*prev = NULL;
	engine_cats_free(res->cats);
	res->cats = c;
	/* the next window compares with this one: a copy of names and labels */
	err = 0;
	*prev = calloc(1, sizeof(**prev));
	if (*prev) {
		(*prev)->entity = calloc(c->n + 1, sizeof(char *));
		(*prev)->label = calloc(c->n + 1, sizeof(int));
		if ((*prev)->entity && (*prev)->label) {
			for (size_t i = 0; i < c->n; i++) {
				if (!((*prev)->entity[i] = strdup(c->entity[i])))
					break;
				(*prev)->label[i] = c->label[i];
				(*prev)->n = i + 1;
			}
		}
	}
	c = NULL;
fail:
	engine_cats_free(c);
	free(x);
	free(ko.assign);
	free(ko.centroid);
	free(ko.count);
	return err;
}

int engine_cats_label(const struct engine_cats *c, const struct plan *p,
		      const struct engine_row *r)
{
	char *en;
	size_t i;

	if (!c || !p->cat)
		return 0;
	en = cell_text(p, p->cat->entity_col, r);
	i = en ? find(c->entity, c->n, en) : c->n;
	free(en);
	return i < c->n ? c->label[i] : 0;
}
