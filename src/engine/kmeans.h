/* SPDX-License-Identifier: MIT */
/*
 * k-means over a small set of vectors (hosts, processes, services: tens to
 * thousands, a few hundred features), as Fay's "automatic analysis of
 * cluster behaviour" ran it over per-machine system-call vectors.
 *
 * Deterministic: k-means++ seeding from a fixed seed (splitmix64), Lloyd
 * iterations until no point moves (at most KMEANS_MAX_ITER), the best of
 * KMEANS_RESTARTS seedings by inertia (the first best on a tie).  Every
 * tie is broken towards the lower index: a point equally near two
 * centroids joins the lower one; the farthest point on a tie is the
 * lower one.  The same input in the same order gives the same answer.
 *
 * Empty clusters: when an iteration leaves a cluster empty and some point
 * sits away from its centroid, the empty cluster takes the point farthest
 * from its own centroid (the usual repair); when every point already sits
 * on its centroid (fewer distinct points than k), the cluster stays empty
 * and is reported so (count 0).
 */
#ifndef FAY_ENGINE_KMEANS_H
#define FAY_ENGINE_KMEANS_H

#include <stddef.h>
#include <stdint.h>

#define KMEANS_MAX_ITER	100
#define KMEANS_RESTARTS	8
#define KMEANS_SEED	0x66617921ull	/* "fay!" */

struct kmeans_out {
	int *assign;		/* n: cluster of each point, 0..k-1 */
	double *centroid;	/* k * d, row-major */
	size_t *count;		/* k: points per cluster (0: empty) */
	double inertia;		/* sum of squared distances to the centroids */
	int iterations;		/* of the chosen run */
};

/*
 * Cluster n points of d dimensions (pts: n * d doubles, row-major) into
 * k clusters.  out's arrays are the caller's (n, k * d and k entries).
 * Clusters are numbered canonically: by the index of their first point,
 * empty clusters last, so the answer does not depend on the seeding's
 * labels.  Returns 0, or -EINVAL (k < 1, n or d 0, a non-finite value).
 */
int kmeans(const double *pts, size_t n, size_t d, int k, uint64_t seed,
	   struct kmeans_out *out);

/*
 * Choosing k (categorize ... into auto).  The mean silhouette of a
 * clustering (Rousseeuw 1987): for each point, a = its mean Euclidean
 * distance to the other points of its cluster, b = the least mean
 * distance to the points of another non-empty cluster, s = (b - a) /
 * max(a, b) (0 for a point alone in its cluster, or with no other
 * cluster); the mean of s over the points, from -1 to 1.  Over more
 * than KMEANS_SIL_SAMPLE points it is the silhouette of an even sample
 * (every ceil(n / KMEANS_SIL_SAMPLE)-th point), so that its cost stays
 * bounded (sample^2 * d).  Returns 0 for n < 2.
 */
#define KMEANS_SIL_SAMPLE	1024
#define KMEANS_SIL_MIN		0.25	/* below it: no structure, k = 1 */
double kmeans_silhouette(const double *pts, size_t n, size_t d, const int *assign, int k);

/*
 * k-means with k chosen: every k from 2 to min(kmax, n - 1) is run
 * (kmeans() above) and the one of the largest mean silhouette kept (the
 * smaller k on a tie); when that silhouette is under KMEANS_SIL_MIN
 * ("no substantial structure", Kaufman and Rousseeuw) or n < 3, k is 1.
 * out's arrays hold kmax clusters.  Returns the k chosen (>= 1), with
 * its silhouette in *sil (0 for k = 1), or -EINVAL / -ENOMEM.
 */
int kmeans_auto(const double *pts, size_t n, size_t d, int kmax, uint64_t seed,
		struct kmeans_out *out, double *sil);

#endif
