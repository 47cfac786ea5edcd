// SPDX-License-Identifier: MIT
/*
 * k-means (engine/kmeans.h) against answers known by construction:
 *  - three well separated blobs are recovered exactly, labelled by their
 *    first point, with their true means as centroids, for many seeds;
 *  - the answer is the same for the same input (determinism);
 *  - ties: a point equidistant from two centroids joins the lower one;
 *  - fewer distinct points than k: the extra clusters are empty (count 0)
 *    and every point sits on its centroid (inertia 0);
 *  - k = 1: the mean of everything; k = n: every point alone;
 *  - bad input (k 0, d 0, NaN) is refused;
 *  - the silhouette against values worked by hand, and k chosen by it
 *    (into auto): 2, 3 and 4 blobs give 2, 3 and 4; identical points
 *    give 1.  (Points spread evenly on a line give 2, silhouette 0.61:
 *    the silhouette cannot tell an even spread from two halves, see
 *    docs/QUERY.md.)
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "test.h"
#include "engine/kmeans.h"

#define MAXN 64
#define MAXK 8
#define MAXD 4

static int as[MAXN];
static double cen[MAXK * MAXD];
static size_t cnt[MAXK];

static struct kmeans_out out(void)
{
	return (struct kmeans_out){ .assign = as, .centroid = cen, .count = cnt };
}

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-9;
}

static void blobs(void)
{
	/* 3 blobs of 5 points in 2-D, interleaved in the input order */
	static const double centre[3][2] = { { 0, 0 }, { 10, 0 }, { 0, 10 } };
	static const double off[5][2] = { { 0, 0 }, { 1, 0 }, { -1, 0 }, { 0, 1 }, { 0, -1 } };
	double pts[15 * 2];
	int truth[15];
	int bad_runs = 0;

	for (int i = 0; i < 15; i++) {
		int b = i % 3, o = i / 3;

		pts[2 * i] = centre[b][0] + off[o][0];
		pts[2 * i + 1] = centre[b][1] + off[o][1];
		truth[i] = b;	/* first points 0, 1, 2 are of blobs 0, 1, 2 */
	}
	for (uint64_t seed = 1; seed <= 200; seed++) {
		struct kmeans_out o = out();
		bool same = true;

		if (kmeans(pts, 15, 2, 3, seed, &o)) {
			bad_runs++;
			continue;
		}
		for (int i = 0; i < 15; i++)
			same &= as[i] == truth[i];
		for (int m = 0; m < 3; m++)
			same &= cnt[m] == 5 && near(cen[2 * m], centre[m][0]) &&
				near(cen[2 * m + 1], centre[m][1]);
		if (!same)
			bad_runs++;
	}
	is_int(bad_runs, 0, "3 blobs recovered exactly, canonical labels, true means (200 seeds)");
	{
		struct kmeans_out o = out();
		int a1[15];
		double in1;

		kmeans(pts, 15, 2, 3, KMEANS_SEED, &o);
		memcpy(a1, as, sizeof(a1));
		in1 = o.inertia;
		kmeans(pts, 15, 2, 3, KMEANS_SEED, &o);
		ok(!memcmp(a1, as, sizeof(a1)) && in1 == o.inertia, "same input, same answer");
		ok(near(o.inertia, 15 * 0.8), "inertia is the sum of squared distances (12)");
	}
}

static void ties(void)
{
	/* points at -1, +1 and 0 on a line, k 2: whichever seeding, the best
	 * answer puts 0 with one side; the run must be stable and its
	 * labels canonical (point 0 in cluster 0) */
	double pts[] = { -1, 1, 0, -1, 1 };
	struct kmeans_out o = out();

	is_int(kmeans(pts, 5, 1, 2, KMEANS_SEED, &o), 0, "ties: runs");
	is_int(as[0], 0, "ties: the first point is in cluster 0");
	ok(as[3] == as[0] && as[4] == as[1] && as[0] != as[1], "ties: equal points together");
	ok(near(o.inertia, 2.0 / 3), "ties: the middle point joins one side (inertia 2/3, got %g)",
	   o.inertia);

	/* a point exactly between two pairs: two answers are equally good;
	 * ties go to the lower index, so the same one comes every time */
	double p2[] = { 0, 0, 2, 2, 1 };
	struct kmeans_out o2 = out();
	int first[5];

	kmeans(p2, 5, 1, 2, KMEANS_SEED, &o2);
	memcpy(first, as, sizeof(first));
	ok(near(o2.inertia, 2.0 / 3) && as[0] == as[1] && as[2] == as[3] && as[0] != as[2],
	   "ties: the middle point between two pairs: inertia 2/3");
	kmeans(p2, 5, 1, 2, KMEANS_SEED, &o2);
	ok(!memcmp(first, as, sizeof(first)), "ties: the same answer again");
}

static void empty(void)
{
	/* 4 points, 2 distinct values, k 4: two clusters stay empty */
	double pts[] = { 3, 3, 3, 3, 7, 7, 7, 7 };
	struct kmeans_out o = out();

	is_int(kmeans(pts, 4, 2, 4, KMEANS_SEED, &o), 0, "empty: runs");
	ok(cnt[0] == 2 && cnt[1] == 2 && cnt[2] == 0 && cnt[3] == 0,
	   "empty: 2 + 2 points, the empty clusters last (%zu %zu %zu %zu)",
	   cnt[0], cnt[1], cnt[2], cnt[3]);
	ok(as[0] == 0 && as[1] == 0 && as[2] == 1 && as[3] == 1, "empty: assignments");
	ok(o.inertia == 0, "empty: every point on its centroid");
	ok(cen[4] == 0 && cen[5] == 0 && cen[6] == 0 && cen[7] == 0,
	   "empty: an empty cluster's centroid is 0");

	/* all points the same */
	double same[] = { 5, 5, 5 };
	struct kmeans_out o2 = out();

	kmeans(same, 3, 1, 3, KMEANS_SEED, &o2);
	ok(cnt[0] == 3 && cnt[1] == 0 && cnt[2] == 0 && near(cen[0], 5),
	   "one distinct point: one cluster of 3");
}

static void edges(void)
{
	double pts[] = { 1, 2, 3, 10 };
	struct kmeans_out o = out();

	kmeans(pts, 4, 1, 1, KMEANS_SEED, &o);
	ok(cnt[0] == 4 && near(cen[0], 4), "k 1: the mean of everything");
	kmeans(pts, 4, 1, 4, KMEANS_SEED, &o);
	ok(cnt[0] == 1 && cnt[1] == 1 && cnt[2] == 1 && cnt[3] == 1 && o.inertia == 0 &&
	   as[0] == 0 && as[1] == 1 && as[2] == 2 && as[3] == 3, "k n: every point alone, in order");
	is_int(kmeans(pts, 4, 1, 0, KMEANS_SEED, &o), -EINVAL, "k 0 refused");
	is_int(kmeans(pts, 4, 0, 2, KMEANS_SEED, &o), -EINVAL, "d 0 refused");
	pts[1] = NAN;
	is_int(kmeans(pts, 4, 1, 2, KMEANS_SEED, &o), -EINVAL, "NaN refused");
	is_int(kmeans(NULL, 0, 1, 2, KMEANS_SEED, &o), 0, "no points: nothing to do");
	ok(cnt[0] == 0 && cnt[1] == 0, "no points: every cluster empty");
}

/* n blobs of 5 points in 2-D, far apart, interleaved */
static int blob_pts(int nb, double *pts)
{
	static const double off[5][2] = { { 0, 0 }, { 1, 0 }, { -1, 0 }, { 0, 1 }, { 0, -1 } };

	for (int i = 0; i < nb * 5; i++) {
		pts[2 * i] = 20.0 * (i % nb) + off[i / nb][0];
		pts[2 * i + 1] = 7.0 * (i % nb) * (i % nb) + off[i / nb][1];
	}
	return nb * 5;
}

static void auto_k(void)
{
	/* by hand: 0 1 | 10 11: a = 1, b = 10 and 9 or 11 ... */
	double line[] = { 0, 1, 10, 11 }, pts[MAXN * 2], sil;
	int two[] = { 0, 0, 1, 1 }, one[] = { 0, 0, 0, 0 }, k;
	struct kmeans_out o = out();
	/* point 0: a = 1, b = (10 + 11) / 2 = 10.5: s = 9.5 / 10.5; point 1:
	 * a = 1, b = 9.5: 8.5 / 9.5; symmetric for 2 and 3 */
	double want = (9.5 / 10.5 + 8.5 / 9.5) / 2;

	ok(near(kmeans_silhouette(line, 4, 1, two, 2), want),
	   "silhouette of {0 1}{10 11}: %.6f (by hand %.6f)", kmeans_silhouette(line, 4, 1, two, 2),
	   want);
	ok(near(kmeans_silhouette(line, 4, 1, one, 2), 0), "one cluster: silhouette 0");
	for (int nb = 2; nb <= 4; nb++) {
		int n = blob_pts(nb, pts);

		k = kmeans_auto(pts, (size_t)n, 2, MAXK, KMEANS_SEED, &o, &sil);
		is_int(k, nb, "%d blobs: k chosen %d (silhouette %.3f)", nb, k, sil);
		ok(sil > 0.8, "... a strong structure (%.3f > 0.8)", sil);
	}
	for (int i = 0; i < 12; i++)
		pts[i] = 3;
	k = kmeans_auto(pts, 12, 1, MAXK, KMEANS_SEED, &o, &sil);
	ok(k == 1 && cnt[0] == 12, "12 identical points: k 1, all in it");
	k = kmeans_auto(line, 2, 1, MAXK, KMEANS_SEED, &o, &sil);
	is_int(k, 1, "2 points: k 1 (silhouette needs 3)");
	is_int(kmeans_auto(line, 4, 1, 0, KMEANS_SEED, &o, &sil), -EINVAL, "kmax 0 refused");
}

int main(void)
{
	blobs();
	ties();
	empty();
	edges();
	auto_k();
	return test_done();
}
