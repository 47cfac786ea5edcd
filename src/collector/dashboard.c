// SPDX-License-Identifier: MIT
/*
 * The latency dashboard (BlkKin's monitoring view): for every (service,
 * span name) seen in a window, the count, errors, rate and the p50, p99
 * and average duration, over the whole window and per time bucket, with
 * each cell judged against its threshold.
 *
 * Percentiles are exact (nearest rank over the sorted durations): a
 * window is minutes of spans, small enough to sort.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/dashboard.h"
#include "collector/thresholds.h"
#include "common/err.h"
#include "store/store.h"

#define DASH_MAX_BUCKETS 720
#define DASH_MAX_KEYS    2000

struct durs {
	uint64_t *v;
	size_t n, cap;
	uint64_t count, errors;   /* every span, with or without a duration */
};

struct dkey {
	char *service, *name;
	struct durs *b;           /* nbuckets */
};

struct dash {
	uint64_t from_us, step_us;
	size_t nbuckets;
	struct dkey *k;
	size_t nk, capk;
	size_t last;              /* index of the last key hit */
	int dropped_keys;
};

static int durs_add(struct durs *d, uint64_t v)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		uint64_t *nv = realloc(d->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		d->v = nv;
		d->cap = cap;
	}
	d->v[d->n++] = v;
	return 0;
}

static int zs_is(struct zs_str s, const char *c)
{
	return strlen(c) == s.len && !memcmp(s.p, c, s.len);
}

static struct dkey *key_get(struct dash *d, struct zs_str svc, struct zs_str name)
{
	struct dkey *k;

	if (d->nk && zs_is(svc, d->k[d->last].service) && zs_is(name, d->k[d->last].name))
		return &d->k[d->last];
	for (size_t i = 0; i < d->nk; i++) {
		if (zs_is(svc, d->k[i].service) && zs_is(name, d->k[i].name)) {
			d->last = i;
			return &d->k[i];
		}
	}
	if (d->nk >= DASH_MAX_KEYS) {
		d->dropped_keys = 1;
		return NULL;
	}
	if (d->nk == d->capk) {
		size_t cap = d->capk ? d->capk * 2 : 32;
		struct dkey *nk = realloc(d->k, cap * sizeof(*nk));

		if (!nk)
			return NULL;
		d->k = nk;
		d->capk = cap;
	}
	k = &d->k[d->nk];
	k->service = strndup(svc.p, svc.len);
	k->name = strndup(name.p, name.len);
	k->b = calloc(d->nbuckets, sizeof(*k->b));
	if (!k->service || !k->name || !k->b) {
		free(k->service);
		free(k->name);
		free(k->b);
		return NULL;
	}
	d->last = d->nk++;
	return k;
}

static int on_row(void *ctx, const struct store_row *r)
{
	struct dash *d = ctx;
	struct dkey *k;
	struct durs *b;

	if (r->start_us < d->from_us)
		return 0;
	k = key_get(d, r->service, r->name);
	if (!k)
		return d->dropped_keys ? 0 : -ENOMEM;
	b = &k->b[(r->start_us - d->from_us) / d->step_us];
	b->count++;
	b->errors += r->error;
	if (r->duration_us && durs_add(b, r->duration_us))
		return -ENOMEM;
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of sorted v (n > 0). */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
	size_t r = (size_t)(p * (double)n + 0.999999);

	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return v[r - 1];
}

struct stats {
	uint64_t count, errors, p50, p99;
	double avg;
	int has_lat;
};

static void stats_of(struct durs *d, struct stats *s)
{
	uint64_t sum = 0;

	memset(s, 0, sizeof(*s));
	s->count = d->count;
	s->errors = d->errors;
	if (!d->n)
		return;
	qsort(d->v, d->n, sizeof(*d->v), cmp_u64);
	for (size_t i = 0; i < d->n; i++)
		sum += d->v[i];
	s->p50 = pct(d->v, d->n, 0.50);
	s->p99 = pct(d->v, d->n, 0.99);
	s->avg = (double)sum / (double)d->n;
	s->has_lat = 1;
}

static const char *state(double v, double limit, int has)
{
	if (limit < 0 || !has)
		return "none";
	return v > limit ? "over" : "ok";
}

static json_t *key_json(struct dash *d, struct dkey *k, const json_t *th_doc)
{
	json_t *o, *ser, *sp50, *sp99, *savg, *srate, *serr;
	struct durs all = { 0 };
	struct th_limits lim;
	struct stats st;
	double secs = (double)(d->nbuckets * d->step_us) / 1e6;
	double er;

	ser = json_object();
	sp50 = json_array(), sp99 = json_array(), savg = json_array();
	srate = json_array(), serr = json_array();
	for (size_t i = 0; i < d->nbuckets; i++) {
		struct stats bs;
		struct durs *b = &k->b[i];

		stats_of(b, &bs);
		json_array_append_new(sp50, bs.has_lat ? json_integer((json_int_t)bs.p50) : json_null());
		json_array_append_new(sp99, bs.has_lat ? json_integer((json_int_t)bs.p99) : json_null());
		json_array_append_new(savg, bs.has_lat ? json_real(bs.avg) : json_null());
		json_array_append_new(srate, json_real((double)bs.count * 1e6 / (double)d->step_us));
		json_array_append_new(serr, json_integer((json_int_t)bs.errors));
		all.count += b->count;
		all.errors += b->errors;
		for (size_t j = 0; j < b->n; j++)
			if (durs_add(&all, b->v[j]))
				break;
	}
	json_object_set_new(ser, "p50_us", sp50);
	json_object_set_new(ser, "p99_us", sp99);
	json_object_set_new(ser, "avg_us", savg);
	json_object_set_new(ser, "rate", srate);
	json_object_set_new(ser, "errors", serr);
	stats_of(&all, &st);
	free(all.v);
	thresholds_match(th_doc, k->service, k->name, &lim);
	er = st.count ? (double)st.errors / (double)st.count : 0;
	o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:f, s:o, s:o, s:o, s:o,"
		      " s:{s:o, s:o, s:o, s:o}, s:{s:s, s:s, s:s, s:s}}",
		      "service", k->service, "span", k->name,
		      "count", (json_int_t)st.count, "errors", (json_int_t)st.errors,
		      "rate", (double)st.count / secs, "error_rate", er,
		      "p50_us", st.has_lat ? json_integer((json_int_t)st.p50) : json_null(),
		      "p99_us", st.has_lat ? json_integer((json_int_t)st.p99) : json_null(),
		      "avg_us", st.has_lat ? json_real(st.avg) : json_null(),
		      "series", ser,
		      "thresholds",
		      "p50_us", lim.p50_us >= 0 ? json_real(lim.p50_us) : json_null(),
		      "p99_us", lim.p99_us >= 0 ? json_real(lim.p99_us) : json_null(),
		      "avg_us", lim.avg_us >= 0 ? json_real(lim.avg_us) : json_null(),
		      "error_rate", lim.error_rate >= 0 ? json_real(lim.error_rate) : json_null(),
		      "state",
		      "p50_us", state((double)st.p50, lim.p50_us, st.has_lat),
		      "p99_us", state((double)st.p99, lim.p99_us, st.has_lat),
		      "avg_us", state(st.avg, lim.avg_us, st.has_lat),
		      "error_rate", state(er, lim.error_rate, st.count > 0));
	return o;
}

static int key_cmp(const void *x, const void *y)
{
	const struct dkey *a = x, *b = y;
	int r = strcmp(a->service, b->service);

	return r ? r : strcmp(a->name, b->name);
}

json_t *dashboard_json(struct store_reader *r, uint64_t end_us, uint64_t window_us,
		       uint64_t step_us, const json_t *th_doc, int *ret)
{
	struct dash d = { .step_us = step_us };
	json_t *out = NULL, *rows, *times;

	*ret = 0;
	if (!step_us || window_us < step_us || end_us < window_us) {
		*ret = -EINVAL;
		return NULL;
	}
	d.nbuckets = (size_t)((window_us + step_us - 1) / step_us);
	if (d.nbuckets > DASH_MAX_BUCKETS) {
		*ret = -E2BIG;
		return NULL;
	}
	d.from_us = end_us - d.nbuckets * step_us;
	*ret = store__scan(r, d.from_us, end_us, on_row, &d);
	if (*ret)
		goto out;
	qsort(d.k, d.nk, sizeof(*d.k), key_cmp);
	rows = json_array();
	times = json_array();
	for (size_t i = 0; i < d.nbuckets; i++)
		json_array_append_new(times, json_integer((json_int_t)((d.from_us + i * step_us) / 1000)));
	for (size_t i = 0; i < d.nk; i++)
		json_array_append_new(rows, key_json(&d, &d.k[i], th_doc));
	out = json_pack("{s:I, s:I, s:I, s:o, s:o, s:b}",
			"endTs", (json_int_t)(end_us / 1000),
			"window_ms", (json_int_t)(d.nbuckets * step_us / 1000),
			"step_ms", (json_int_t)(step_us / 1000),
			"times", times, "rows", rows, "truncated", d.dropped_keys);
	if (!out)
		*ret = -ENOMEM;
out:
	for (size_t i = 0; i < d.nk; i++) {
		for (size_t j = 0; j < d.nbuckets; j++)
			free(d.k[i].b[j].v);
		free(d.k[i].b);
		free(d.k[i].service);
		free(d.k[i].name);
	}
	free(d.k);
	return out;
}
