/* SPDX-License-Identifier: MIT */
/*
 * The service dependency graph from parent/child spans (deps.c), as
 * Zipkin's /api/v2/dependencies.
 */
#ifndef FAY_COLLECTOR_DEPS_H
#define FAY_COLLECTOR_DEPS_H

#include <jansson.h>
#include <stdint.h>

struct store_reader;

/* Zipkin's dependency links [{"parent","child","callCount","errorCount"}]
 * of the traces with a span that started in [from_us, to_us], every span
 * of them (store__scan_traces()), sorted by parent then child (the order
 * the store hands traces over in is no part of the answer).  NULL with
 * *ret. */
json_t *deps_json(struct store_reader *r, uint64_t from_us, uint64_t to_us, int *ret);

#endif
