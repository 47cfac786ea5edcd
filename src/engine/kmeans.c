// SPDX-License-Identifier: MIT
/*
 * k-means: k-means++ seeding, Lloyd iterations, restarts (kmeans.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kmeans.h"

/* splitmix64: a tiny deterministic generator for the seeding. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double next_unit(uint64_t *s)
{
	return (double)(next_rand(s) >> 11) * 0x1.0p-53;
}

static double dist2(const double *a, const double *b, size_t d)
{
	double s = 0;

	for (size_t j = 0; j < d; j++) {
		double x = a[j] - b[j];

		s += x * x;
	}
	return s;
}

/* The nearest centroid of p among the k live ones (lowest on a tie). */
static int nearest(const double *p, const double *c, const bool *live, size_t d, int k,
		   double *best)
{
	int bi = -1;

	for (int i = 0; i < k; i++) {
		double x;

		if (!live[i])
			continue;
		x = dist2(p, c + (size_t)i * d, d);
		if (bi < 0 || x < *best) {
			bi = i;
			*best = x;
		}
	}
	return bi;
}

/*
 * k-means++: the first centre a uniform pick, each next one a pick
 * weighted by the squared distance to the nearest centre so far.  When
 * every point already sits on a centre, the remaining centres stay dead
 * (live[i] false): fewer distinct points than k.
 */
static void seed_centres(const double *pts, size_t n, size_t d, int k, uint64_t *rs,
			 double *c, bool *live, double *dmin)
{
	size_t first = (size_t)(next_unit(rs) * (double)n);

	if (first >= n)
		first = n - 1;
	memset(live, 0, (size_t)k * sizeof(*live));
	memcpy(c, pts + first * d, d * sizeof(*c));
	live[0] = true;
	for (size_t i = 0; i < n; i++)
		dmin[i] = dist2(pts + i * d, c, d);
	for (int m = 1; m < k; m++) {
		double sum = 0, r, acc = 0;
		size_t pick = n;

		for (size_t i = 0; i < n; i++)
			sum += dmin[i];
		if (!(sum > 0))
			break;
		r = next_unit(rs) * sum;
		for (size_t i = 0; i < n; i++) {
			acc += dmin[i];
			if (dmin[i] > 0 && acc > r) {
				pick = i;
				break;
			}
		}
		if (pick == n) {	/* rounding: the last point with weight */
			for (size_t i = n; i-- > 0;)
				if (dmin[i] > 0) {
					pick = i;
					break;
				}
		}
		memcpy(c + (size_t)m * d, pts + pick * d, d * sizeof(*c));
		live[m] = true;
		for (size_t i = 0; i < n; i++) {
			double x = dist2(pts + i * d, c + (size_t)m * d, d);

			if (x < dmin[i])
				dmin[i] = x;
		}
	}
}

/* Means of the clusters; a live cluster left empty takes the point
 * farthest from its centroid when there is one (returns true: iterate
 * again).  cnt gets each cluster's size. */
static bool update_centres(const double *pts, size_t n, size_t d, int k, int *as,
			   double *c, bool *live, size_t *cnt, double *dmin)
{
	bool moved = false;

	memset(cnt, 0, (size_t)k * sizeof(*cnt));
	for (size_t i = 0; i < n; i++)
		cnt[as[i]]++;
	for (int m = 0; m < k; m++)
		if (cnt[m])
			memset(c + (size_t)m * d, 0, d * sizeof(*c));
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < d; j++)
			c[(size_t)as[i] * d + j] += pts[i * d + j];
	for (int m = 0; m < k; m++)
		if (cnt[m])
			for (size_t j = 0; j < d; j++)
				c[(size_t)m * d + j] /= (double)cnt[m];
	for (int m = 0; m < k; m++) {
		size_t far = n;
		double fd = 0;

		if (!live[m] || cnt[m])
			continue;
		for (size_t i = 0; i < n; i++) {
			dmin[i] = dist2(pts + i * d, c + (size_t)as[i] * d, d);
			if (cnt[as[i]] > 1 && dmin[i] > fd) {
				fd = dmin[i];
				far = i;
			}
		}
		if (far == n) {
			live[m] = false;	/* every point on its centroid */
			continue;
		}
		memcpy(c + (size_t)m * d, pts + far * d, d * sizeof(*c));
		moved = true;
		/* the point moves on the next assignment */
		cnt[as[far]]--;
		cnt[m]++;
		as[far] = m;
	}
	return moved;
}

/* One run of Lloyd's algorithm from a seeding; returns the inertia. */
static double lloyd(const double *pts, size_t n, size_t d, int k, uint64_t *rs, int *as,
		    double *c, size_t *cnt, bool *live, double *dmin, int *iters)
{
	double inertia = 0;
	int it;

	seed_centres(pts, n, d, k, rs, c, live, dmin);
	for (size_t i = 0; i < n; i++)
		as[i] = -1;
	for (it = 0; it < KMEANS_MAX_ITER; it++) {
		bool changed = false;

		for (size_t i = 0; i < n; i++) {
			double best = 0;
			int m = nearest(pts + i * d, c, live, d, k, &best);

			if (m != as[i]) {
				as[i] = m;
				changed = true;
			}
		}
		if (update_centres(pts, n, d, k, as, c, live, cnt, dmin))
			changed = true;
		if (!changed)
			break;
	}
	*iters = it < KMEANS_MAX_ITER ? it + 1 : it;
	for (int m = 0; m < k; m++)
		if (!live[m])
			memset(c + (size_t)m * d, 0, d * sizeof(*c));
	for (size_t i = 0; i < n; i++)
		inertia += dist2(pts + i * d, c + (size_t)as[i] * d, d);
	return inertia;
}

/* Renumber clusters by their first point, empty ones last. */
static void canonical(size_t n, size_t d, int k, int *as, double *c, size_t *cnt)
{
	int *map = malloc((size_t)k * sizeof(*map));
	double *nc = malloc((size_t)k * d * sizeof(*nc));
	size_t *ncnt = calloc((size_t)k, sizeof(*ncnt));
	int next = 0;

	if (!map || !nc || !ncnt)
		goto out;	/* labels stay as the run left them */
	for (int m = 0; m < k; m++)
		map[m] = -1;
	for (size_t i = 0; i < n; i++)
		if (map[as[i]] < 0)
			map[as[i]] = next++;
	for (int m = 0; m < k; m++)
		if (map[m] < 0)
			map[m] = next++;
	for (int m = 0; m < k; m++) {
		memcpy(nc + (size_t)map[m] * d, c + (size_t)m * d, d * sizeof(*c));
		ncnt[map[m]] = cnt[m];
	}
	for (size_t i = 0; i < n; i++)
		as[i] = map[as[i]];
	memcpy(c, nc, (size_t)k * d * sizeof(*c));
	memcpy(cnt, ncnt, (size_t)k * sizeof(*cnt));
out:
	free(map);
	free(nc);
	free(ncnt);
}

int kmeans(const double *pts, size_t n, size_t d, int k, uint64_t seed,
	   struct kmeans_out *out)
{
	int *as = NULL;
	double *c = NULL, *dmin = NULL;
	size_t *cnt = NULL;
	bool *live = NULL;
	uint64_t rs = seed;
	int err = 0;

	if (k < 1 || !d)
		return -EINVAL;
	for (size_t i = 0; i < n * d; i++)
		if (!isfinite(pts[i]))
			return -EINVAL;
	memset(out->count, 0, (size_t)k * sizeof(*out->count));
	memset(out->centroid, 0, (size_t)k * d * sizeof(*out->centroid));
	out->inertia = 0;
	out->iterations = 0;
	if (!n)
		return 0;
	as = malloc(n * sizeof(*as));
	c = malloc((size_t)k * d * sizeof(*c));
	dmin = malloc(n * sizeof(*dmin));
	cnt = malloc((size_t)k * sizeof(*cnt));
	live = malloc((size_t)k * sizeof(*live));
	if (!as || !c || !dmin || !cnt || !live) {
		err = -ENOMEM;
		goto out;
	}
	for (int r = 0; r < KMEANS_RESTARTS; r++) {
		int iters = 0;
		double in = lloyd(pts, n, d, k, &rs, as, c, cnt, live, dmin, &iters);

		if (r && !(in < out->inertia))
			continue;
		out->inertia = in;
		out->iterations = iters;
		memcpy(out->assign, as, n * sizeof(*as));
		memcpy(out->centroid, c, (size_t)k * d * sizeof(*c));
		for (int m = 0; m < k; m++)
			out->count[m] = live[m] ? cnt[m] : 0;
	}
	canonical(n, d, k, out->assign, out->centroid, out->count);
out:
	free(as);
	free(c);
	free(dmin);
	free(cnt);
	free(live);
	return err;
}

/* The even sample the silhouette is taken over: every step-th point. */
static size_t sil_step(size_t n)
{
	return (n + KMEANS_SIL_SAMPLE - 1) / KMEANS_SIL_SAMPLE;
}

/* The distances between the sample's points (ns * ns), or NULL. */
static double *sil_dists(const double *pts, size_t n, size_t d, size_t *ns)
{
	size_t step = sil_step(n), m = (n + step - 1) / step;
	double *dm = malloc((m * m + 1) * sizeof(*dm));

	*ns = m;
	if (!dm)
		return NULL;
	for (size_t a = 0; a < m; a++) {
		dm[a * m + a] = 0;
		for (size_t b = a + 1; b < m; b++)
			dm[a * m + b] = dm[b * m + a] =
				sqrt(dist2(pts + a * step * d, pts + b * step * d, d));
	}
	return dm;
}

/* The mean silhouette of the sample (distances dm, ns points) whose
 * clusters are assign[0], assign[step], ...; sum and cnt hold k. */
static double sil_mean(const double *dm, size_t ns, size_t step, const int *assign, int k,
		       double *sum, size_t *cnt)
{
	double total = 0;

	for (size_t i = 0; i < ns; i++) {
		double a, b = -1, m;
		int own = assign[i * step];

		memset(sum, 0, (size_t)k * sizeof(*sum));
		memset(cnt, 0, (size_t)k * sizeof(*cnt));
		for (size_t j = 0; j < ns; j++) {
			if (j == i)
				continue;
			sum[assign[j * step]] += dm[i * ns + j];
			cnt[assign[j * step]]++;
		}
		if (!cnt[own])
			continue;	/* alone in its cluster: s = 0 */
		a = sum[own] / (double)cnt[own];
		for (int c = 0; c < k; c++)
			if (c != own && cnt[c] && (b < 0 || sum[c] / (double)cnt[c] < b))
				b = sum[c] / (double)cnt[c];
		if (b < 0)
			continue;	/* no other cluster: s = 0 */
		m = a > b ? a : b;
		if (m > 0)
			total += (b - a) / m;
	}
	return ns ? total / (double)ns : 0;
}

double kmeans_silhouette(const double *pts, size_t n, size_t d, const int *assign, int k)
{
	double *sum = calloc((size_t)k + 1, sizeof(*sum)), *dm = NULL, s = 0;
	size_t *cnt = calloc((size_t)k + 1, sizeof(*cnt)), ns = 0;

	if (n >= 2 && sum && cnt && (dm = sil_dists(pts, n, d, &ns)))
		s = sil_mean(dm, ns, sil_step(n), assign, k, sum, cnt);
	free(dm);
	free(sum);
	free(cnt);
	return s;
}

int kmeans_auto(const double *pts, size_t n, size_t d, int kmax, uint64_t seed,
		struct kmeans_out *out, double *sil)
{
	struct kmeans_out t = { 0 };
	double *dm = NULL, *sum = NULL, bs = 0;
	size_t *cnt = NULL, ns = 0;
	int best = 1, err = 0;

	*sil = 0;
	if (kmax < 1 || !d)
		return -EINVAL;
	t.assign = malloc((n + 1) * sizeof(*t.assign));
	t.centroid = malloc(((size_t)kmax * d + 1) * sizeof(*t.centroid));
	t.count = malloc(((size_t)kmax + 1) * sizeof(*t.count));
	sum = malloc(((size_t)kmax + 1) * sizeof(*sum));
	cnt = malloc(((size_t)kmax + 1) * sizeof(*cnt));
	/* the sample's distances once, for every k */
	if (!t.assign || !t.centroid || !t.count || !sum || !cnt ||
	    (n >= 3 && !(dm = sil_dists(pts, n, d, &ns)))) {
		err = -ENOMEM;
		goto out;
	}
	for (int k = 2; k <= kmax && (size_t)k < n; k++) {
		double s;

		err = kmeans(pts, n, d, k, seed, &t);
		if (err)
			goto out;
		s = sil_mean(dm, ns, sil_step(n), t.assign, k, sum, cnt);
		if (s > bs) {	/* the best so far: its answer is out's */
			bs = s;
			best = k;
			memcpy(out->assign, t.assign, n * sizeof(*t.assign));
			memcpy(out->centroid, t.centroid, (size_t)k * d * sizeof(*t.centroid));
			memcpy(out->count, t.count, (size_t)k * sizeof(*t.count));
			out->inertia = t.inertia;
			out->iterations = t.iterations;
		}
	}
	if (bs < KMEANS_SIL_MIN) {
		best = 1;
		bs = 0;
		err = kmeans(pts, n, d, 1, seed, out);
	}
	*sil = bs;
out:
	free(dm);
	free(sum);
	free(cnt);
	free(t.assign);
	free(t.centroid);
	free(t.count);
	return err ? err : best;
}
