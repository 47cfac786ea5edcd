// SPDX-License-Identifier: MIT
/*
 * bench/bench_categorize.c: what `categorize ... into K` and `into auto`
 * cost the collector per window (engine/kmeans.h), against scikit-learn
 * doing the same (KMeans with 8 k-means++ seedings, silhouette_score on a
 * sample of 1024), on the same data in the same run.
 *
 * The data: n entities of d features in 4 groups (each group's centre a
 * random point of [0,1)^d, each entity its centre plus uniform noise of
 * +-0.05), from a fixed seed.  For each (n, d): fay's time for k = 4 and
 * for auto (k from 2 to 8), medians of 5, the k auto chose; then the
 * same from Debian's /usr/bin/python3 (python3-sklearn), and the ratios.
 * Run from the top of the tree:
 *   build/bench/bench_categorize [--sizes 100x20,1000x50,5000x300]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include "bench.h"
#include "engine/kmeans.h"

#define RUNS 5
#define TRUE_K 4
#define AUTO_MAX 8

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* n x d points in TRUE_K groups; the data also into path (one row a line) */
static double *make(size_t n, size_t d, const char *path)
{
	double *c = malloc(TRUE_K * d * sizeof(*c)), *x = malloc(n * d * sizeof(*x));
	unsigned short s[3] = { 0x6661, 0x7921, 0x0001 };
	FILE *f = fopen(path, "w");

	if (!c || !x || !f)
		exit(1);
	for (size_t i = 0; i < TRUE_K * d; i++)
		c[i] = erand48(s);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < d; j++) {
			x[i * d + j] = c[(i % TRUE_K) * d + j] + (erand48(s) - 0.5) * 0.1;
			fprintf(f, "%s%.17g", j ? " " : "", x[i * d + j]);
		}
		fputc('\n', f);
	}
	fclose(f);
	free(c);
	return x;
}

static const char *py =
	"import sys, time, numpy as np\n"
	"from sklearn.cluster import KMeans\n"
	"from sklearn.metrics import silhouette_score\n"
	"x = np.loadtxt(sys.argv[1], ndmin=2); n = len(x)\n"
	"def km(k): return KMeans(n_clusters=k, n_init=8, init='k-means++', random_state=1).fit(x)\n"
	"def sil(l):\n"
	"    if n <= 1024: return silhouette_score(x, l)\n"
	"    return silhouette_score(x, l, sample_size=1024, random_state=1)\n"
	"fixed = []; auto = []; chose = 0\n"
	"for r in range(5):\n"
	"    t = time.monotonic(); km(4); fixed.append(time.monotonic() - t)\n"
	"    t = time.monotonic(); best, bs = 1, 0.0\n"
	"    for k in range(2, min(8, n - 1) + 1):\n"
	"        s = sil(km(k).labels_)\n"
	"        if s > bs: best, bs = k, s\n"
	"    if bs < 0.25: best = 1\n"
	"    auto.append(time.monotonic() - t); chose = best\n"
	"print(np.median(fixed) * 1e3, np.median(auto) * 1e3, chose)\n";

/* sklearn's medians (ms) and k on the data in path; -1 when unavailable */
static int peer(const char *path, double *fixed, double *autom, int *k)
{
	char cmd[512];
	FILE *p;
	int n;

	snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 /usr/bin/python3 -c \"$BENCH_PY\" %s 2>/dev/null",
		 path);
	setenv("BENCH_PY", py, 1);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fscanf(p, "%lf %lf %d", fixed, autom, k);
	pclose(p);
	return n == 3 ? 0 : -1;
}

static void one(size_t n, size_t d)
{
	char path[] = "/tmp/fay-bench-cat.XXXXXX";
	double ft[RUNS], at[RUNS], sil = 0, pf, pa;
	struct kmeans_out o = {
		.assign = malloc(n * sizeof(int)),
		.centroid = malloc(AUTO_MAX * d * sizeof(double)),
		.count = malloc(AUTO_MAX * sizeof(size_t)),
	};
	int fd = mkstemp(path), k = 0, pk;
	double *x;

	if (fd < 0 || !o.assign || !o.centroid || !o.count)
		exit(1);
	close(fd);
	x = make(n, d, path);
	for (int r = 0; r < RUNS; r++) {
		double t = now_ms();

		kmeans(x, n, d, TRUE_K, KMEANS_SEED, &o);
		ft[r] = now_ms() - t;
		t = now_ms();
		k = kmeans_auto(x, n, d, AUTO_MAX, KMEANS_SEED, &o, &sil);
		at[r] = now_ms() - t;
	}
	printf("%5zu x %3zu  fay: k=4 %9.2f ms  auto %9.2f ms (k %d, silhouette %.2f)", n, d,
	       median(ft, RUNS), median(at, RUNS), k, sil);
	if (peer(path, &pf, &pa, &pk))
		printf("  sklearn: not available (python3-sklearn)\n");
	else
		printf("  sklearn: k=4 %9.2f ms  auto %9.2f ms (k %d)  fay/sklearn %.2f, %.2f\n",
		       pf, pa, pk, median(ft, RUNS) / pf, median(at, RUNS) / pa);
	fflush(stdout);
	unlink(path);
	free(x);
	free(o.assign);
	free(o.centroid);
	free(o.count);
}

int main(int argc, char **argv)
{
	const char *sizes = "100x20,1000x50,5000x300";
	char *s, *tok, *save;

	if (argc == 3 && !strcmp(argv[1], "--sizes"))
		sizes = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: bench_categorize [--sizes NxD,NxD...]\n");
		return 2;
	}
	printf("categorize: %d groups, k-means k=4 and auto (k 2..%d by silhouette), medians of %d; "
	       "load %s", TRUE_K, AUTO_MAX, RUNS, "");
	fflush(stdout);
	system("cut -d' ' -f1-3 /proc/loadavg");
	s = strdup(sizes);
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t n, d;

		if (sscanf(tok, "%zux%zu", &n, &d) != 2 || n < 1 || d < 1) {
			fprintf(stderr, "bench_categorize: size '%s': want NxD\n", tok);
			return 2;
		}
		one(n, d);
	}
	free(s);
	return 0;
}
