/* SPDX-License-Identifier: MIT */
/*
 * --export zipkin=URL / otlp=URL / otlp-protobuf=URL: a thread per
 * exporter posting committed spans in batches (export.c, libcurl).
 */
#ifndef FAY_COLLECTOR_EXPORT_H
#define FAY_COLLECTOR_EXPORT_H

#include <stddef.h>
#include <stdio.h>

struct zspan;

enum export_kind { EXPORT_ZIPKIN, EXPORT_OTLP, EXPORT_OTLP_PROTOBUF };

/* Start an exporter thread posting to url.  NULL + errno (ELIBACC, logged,
 * when libcurl cannot be loaded). */
struct exporter *exporter_new(enum export_kind kind, const char *url);
/* Flush (bounded by a few seconds) and stop. */
void exporter_free(struct exporter *x);
/* Queue copies of the spans (never blocks; a full queue drops, counted). */
void exporter_push(struct exporter *x, const struct zspan *s, size_t n);
/* The counters of the n exporters as Prometheus lines. */
void exporter_metrics(struct exporter *const *xs, int n, FILE *f);

#endif
