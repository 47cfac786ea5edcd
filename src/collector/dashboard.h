/* SPDX-License-Identifier: MIT */
/*
 * The latency dashboard: per service and span name series (dashboard.c).
 */
#ifndef FAY_COLLECTOR_DASHBOARD_H
#define FAY_COLLECTOR_DASHBOARD_H

#include <jansson.h>
#include <stdint.h>

struct store_reader;

/*
 * The dashboard over [end_us - window_us, end_us) in buckets of step_us:
 * per (service, span name) count, errors, rate, p50/p99/avg of durations,
 * each also per bucket, with the thresholds of doc and a state per cell
 * ("ok", "over", "none").  New reference, or NULL with -errno in *ret.
 */
json_t *dashboard_json(struct store_reader *r, uint64_t end_us, uint64_t window_us,
		       uint64_t step_us, const json_t *th_doc, int *ret);

#endif
