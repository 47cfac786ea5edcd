// SPDX-License-Identifier: MIT
/*
 * The routes added around the Zipkin API of http.c (issue #4): the web UI,
 * its JSON API, FayQL over HTTP, OTLP ingest, the dependency graph and
 * the extra lines of /metrics; and the life cycle of what they need
 * (thresholds, exporters).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/standing.h"
#include "collector/export.h"
#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "collector/otlp_int.h"
#include "collector/thresholds.h"
#include "common/err.h"
#include "common/log.h"
#include "common/prom.h"

int coll_ext_add_export(struct coll_ext_opts *o, const char *s, char *err, size_t errlen)
{
	const char *eq = strchr(s, '=');

	if (!eq || (strncmp(s, "zipkin=", 7) && strncmp(s, "otlp=", 5) &&
		    strncmp(s, "otlp-protobuf=", 14))) {
		snprintf(err, errlen, "--export '%s': expected zipkin=URL, otlp=URL or "
			 "otlp-protobuf=URL", s);
		return -EINVAL;
	}
	if (strncmp(eq + 1, "http://", 7) && strncmp(eq + 1, "https://", 8)) {
		snprintf(err, errlen, "--export '%s': the URL must start with http:// or https://", s);
		return -EINVAL;
	}
	if (o->nexports == EXT_MAX_EXPORTS) {
		snprintf(err, errlen, "--export: at most %d", EXT_MAX_EXPORTS);
		return -EINVAL;
	}
	o->exports[o->nexports++] = s;
	return 0;
}

struct coll_ext *coll_ext_new(struct collector *c, const struct coll_ext_opts *o,
			      char *err, size_t errlen)
{
	struct coll_ext *e = calloc(1, sizeof(*e));
	char *path = NULL;
	int ret = -ENOMEM;

	if (!e)
		goto fail;
	pthread_mutex_init(&e->senders_lock, NULL);
	pthread_mutex_init(&e->qslots_lock, NULL);
	if (!o->thresholds && asprintf(&path, "%s.thresholds.json", o->db) < 0) {
		path = NULL;
		goto fail;
	}
	e->th = thresholds_new(o->thresholds ? o->thresholds : path, err, errlen);
	if (!e->th) {
		ret = -errno;
		goto out;
	}
	for (int i = 0; i < o->nexports; i++) {
		const char *s = o->exports[i];
		enum export_kind kind = !strncmp(s, "otlp=", 5) ? EXPORT_OTLP :
					!strncmp(s, "otlp-protobuf=", 14) ? EXPORT_OTLP_PROTOBUF :
					EXPORT_ZIPKIN;

		e->exp[i] = exporter_new(kind, strchr(s, '=') + 1);
		if (!e->exp[i]) {
			ret = -errno;
			snprintf(err, errlen, "--export %s: %s", s, errstr(ret));
			goto out;
		}
		e->nexp++;
	}
	free(path);
	return e;
fail:
	snprintf(err, errlen, "out of memory");
out:
	free(path);
	coll_ext_free(e);
	return fay_err_ptr(ret);
}

void coll_ext_free(struct coll_ext *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nexp; i++)
		exporter_free(e->exp[i]);
	thresholds_free(e->th);
	pthread_mutex_destroy(&e->senders_lock);
	pthread_mutex_destroy(&e->qslots_lock);
	free(e);
}

void coll_ext_committed(struct collector *c, struct store_batch *const *b, size_t n)
{
	struct coll_ext *e = c->ext;

	if (!e || !e->nexp)
		return;
	for (size_t i = 0; i < n; i++) {
		if (b[i]->duplicate || !b[i]->nspans)
			continue;
		for (int k = 0; k < e->nexp; k++)
			exporter_push(e->exp[k], b[i]->spans, b[i]->nspans);
	}
}

/* ---- /metrics ------------------------------------------------------------- */

/* Per agent and reason: records lost on the host (STATS "lost"), and
 * probe hits (STATS "probes": [{"name", "hits"}]) when the agent has any. */
static void agent_metrics(struct collector *c, FILE *f)
{
	/* the agent's own counters (its /metrics names them the same) */
	prom_family(f, "fay_agent_records_lost_total", "counter",
		    "Records lost on the agent's host, by reason (latest STATS).");
	pthread_mutex_lock(&c->agents_lock);
	for (struct coll_agent *a = c->agents; a; a = a->next) {
		json_t *st = a->stats ? json_loads(a->stats, 0, NULL) : NULL;
		json_t *v;
		const char *k;

		json_object_foreach(json_object_get(st, "lost"), k, v) {
			if (!json_is_integer(v))
				continue;
			fprintf(f, "fay_agent_records_lost_total{agent=\"%s\",host=\"", a->id);
			prom_label(f, a->host);
			fprintf(f, "\",reason=\"");
			prom_label(f, k);
			fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		}
		json_decref(st);
	}
	prom_family(f, "fay_agent_probe_hits_total", "counter",
		    "Events seen by each attached probe (latest STATS).");
	for (struct coll_agent *a = c->agents; a; a = a->next) {
		json_t *st = a->stats ? json_loads(a->stats, 0, NULL) : NULL;
		json_t *p;
		size_t i;

		json_array_foreach(json_object_get(st, "probes"), i, p) {
			const char *name = json_string_value(json_object_get(p, "name"));
			json_t *hits = json_object_get(p, "hits");

			if (!name || !json_is_integer(hits))
				continue;
			fprintf(f, "fay_agent_probe_hits_total{agent=\"%s\",host=\"", a->id);
			prom_label(f, a->host);
			fprintf(f, "\",probe=\"");
			prom_label(f, name);
			fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n", json_integer_value(hits));
		}
		json_decref(st);
	}
	pthread_mutex_unlock(&c->agents_lock);
}

void coll_ext_metrics(struct collector *c, FILE *f)
{
	struct coll_ext *e = c->ext;

	if (!e)
		return;
	prom_u64(f, "fay_collector_ingest_queue_spans", "gauge",
		"Spans waiting for the store (the ingest queue; --ingest-queue).",
		(uint64_t)ingest_queued(c->ingest));
	otlp_sender_metrics(c, f);
	exporter_metrics(e->exp, e->nexp, f);
	agent_metrics(c, f);
}
