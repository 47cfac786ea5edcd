/* SPDX-License-Identifier: MIT */
/*
 * The latency dashboard's thresholds (--thresholds FILE, JSON; thresholds.c).
 */
#ifndef FAY_COLLECTOR_THRESHOLDS_H
#define FAY_COLLECTOR_THRESHOLDS_H

#include <jansson.h>
#include <stddef.h>

struct thresholds;

/* Latency/error limits of one (service, span name); < 0 = none. */
struct th_limits {
	double p50_us, p99_us, avg_us, error_rate;
};

/*
 * Thresholds kept in path (JSON, see thresholds_check()).  A missing file
 * is an empty rule set (created on the first thresholds_set()); a file
 * that does not parse or check is refused: NULL, errno EINVAL, the file
 * and the problem in err.
 */
struct thresholds *thresholds_new(const char *path, char *err, size_t errlen);
void thresholds_free(struct thresholds *t);
const char *thresholds_path(const struct thresholds *t);
/*
 * Check doc: {"rules": [{"service": S, "span": N, "p50_us": X, "p99_us": X,
 * "avg_us": X, "error_rate": F}, ...]} with service/span strings ("*" or
 * absent: any), limits non-negative numbers, error_rate in [0, 1], no
 * other keys.  0 or -EINVAL with the place ("rules[2].p99_us: ...").
 */
int thresholds_check(const json_t *doc, char *err, size_t errlen);
/* Replace the rules with doc (checked) and write the file atomically.
 * 0, -EINVAL (reason in err) or -errno of the write. */
int thresholds_set(struct thresholds *t, json_t *doc, char *err, size_t errlen);
/* A copy of the rules document (new reference; NULL on ENOMEM). */
json_t *thresholds_get(struct thresholds *t);
/* The limits for (service, span) from doc: the most specific rule wins
 * (service and span > service > span > neither), field by field. */
void thresholds_match(const json_t *doc, const char *service, const char *span,
		      struct th_limits *out);

#endif
