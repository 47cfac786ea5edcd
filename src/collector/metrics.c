// SPDX-License-Identifier: MIT
/*
 * Collector counters and per-agent state, and their Prometheus text
 * exposition (format 0.0.4, common/prom.h) for /metrics.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/collector_int.h"
#include "common/clock.h"
#include "common/prom.h"

struct coll_agent *coll_agent_get(struct collector *c, const char *id)
{
	struct coll_agent *a;

	pthread_mutex_lock(&c->agents_lock);
	for (a = c->agents; a; a = a->next)
		if (!strcmp(a->id, id))
			goto out;
	a = calloc(1, sizeof(*a));
	if (a) {
		snprintf(a->id, sizeof(a->id), "%s", id);
		a->next = c->agents;
		c->agents = a;
	}
out:
	pthread_mutex_unlock(&c->agents_lock);
	return a;
}

void coll_agents_free(struct collector *c)
{
	struct coll_agent *a, *n;

	for (a = c->agents; a; a = n) {
		n = a->next;
		free(a->stats);
		free(a);
	}
	c->agents = NULL;
}

void coll_metrics_write(struct collector *c, FILE *f)
{
	static const struct prom_field cs[] = {
#define C(n, f, h) { n, h, offsetof(struct coll_metrics, f), 0 }
		C("fay_collector_spans_received_total", spans_received,
		  "Span records received (wire batches and HTTP POSTs)."),
		C("fay_collector_spans_stored_total", spans_stored,
		  "Spans and partial records committed to the store."),
		C("fay_collector_spans_rejected_total", spans_rejected,
		  "Span records that failed to decode, and spans of refused POST bodies."),
		C("fay_collector_spans_duplicate_total", spans_duplicate,
		  "Span records of duplicate batches, acknowledged but not stored again."),
		C("fay_collector_batches_total", batches, "Wire batches committed."),
		C("fay_collector_batches_duplicate_total", batches_duplicate,
		  "Wire batches with an already committed seq."),
		C("fay_collector_batches_nacked_total", batches_nacked,
		  "Wire batches refused because the store failed (the agent resends)."),
		C("fay_collector_wire_errors_total", wire_errors,
		  "Protocol violations answered with an ERROR frame."),
		C("fay_collector_agent_id_clashes_total", agent_id_clashes,
		  "HELLOs refused: the agent id is connected from another address."),
		C("fay_collector_seq_jumps_total", seq_jumps,
		  "Wire batches refused: seq more than 2^32 past the agent's last."),
		C("fay_collector_wire_connections_total", wire_connections,
		  "Agent connections accepted."),
		C("fay_collector_wire_timeouts_total", wire_timeouts,
		  "Agent-port connections closed: no HELLO in 10 s, or a frame not finished in 30 s."),
		C("fay_collector_wire_busy_total", wire_busy,
		  "Agent-port connections closed: a frame did not fit in --max-memory (the agent retries)."),
		C("fay_collector_wire_peer_refused_total", wire_peer_refused,
		  "Agent-port connections refused: --max-conns-per-peer from that address."),
		C("fay_collector_conn_busy_total", conn_busy,
		  "Connections refused at accept on any port: their memory did not fit in --max-memory."),
		C("fay_collector_http_busy_total", http_busy,
		  "HTTP bodies refused 503 + Retry-After: they did not fit in --max-memory."),
		C("fay_collector_http_requests_total", http_requests, "HTTP requests."),
		C("fay_collector_http_bad_requests_total", http_bad_requests,
		  "HTTP requests answered 4xx."),
		C("fay_collector_http_spans_dropped_total", http_spans_dropped,
		  "Spans in POST bodies that were refused."),
		C("fay_collector_store_errors_total", store_errors, "Failed store operations."),
		C("fay_collector_store_writes_total", store_writes,
		  "Writes of batches committed to the store: one per group of batches"
		  " (fay_collector_spans_stored_total / this = spans a write)."),
		C("fay_collector_store_writes_overlapped_total", store_writes_overlapped,
		  "Writes of batches started while another writer's was under way"
		  " (--clickhouse-writers)."),
		C("fay_collector_retention_deleted_total", retention_deleted,
		  "Rows deleted by retention."),
		C("fay_collector_disk_low_refused_total", disk_low_refused,
		  "Writes of spans refused because the store's disk was low (NACKs, 503s)."),
		C("fay_collector_queries_total", queries_total, "FayQL queries received."),
		C("fay_collector_queries_busy_total", queries_busy,
		  "FayQL queries refused 429: too many running (16 per client address, 32 in all)."),
		C("fay_collector_queries_refused_total", queries_refused,
		  "FayQL queries refused (errors in the query, or no engine to run them)."),
		C("fay_collector_otlp_requests_total", otlp_requests,
		  "OTLP export requests (HTTP /v1/traces and gRPC)."),
		C("fay_collector_otlp_spans_total", otlp_spans,
		  "Spans received over OTLP (HTTP and gRPC)."),
		C("fay_collector_otlp_rejected_total", otlp_rejected,
		  "OTLP requests refused (bad body, type or encoding; no valid span; queue full)."),
		C("fay_collector_otlp_spans_rejected_total", otlp_spans_rejected,
		  "OTLP spans not stored (invalid, or refused while the ingest queue was full)."),
		C("fay_collector_otlp_throttled_total", otlp_throttled,
		  "OTLP requests answered 429 / UNAVAILABLE because the ingest queue was full."),
		C("fay_collector_ui_requests_total", ui_requests, "Web UI files served."),
#undef C
		{ "fay_collector_agents_connected", "Agents connected now.",
		  offsetof(struct coll_metrics, agents_connected), 1 },
		{ "fay_collector_queries_running", "FayQL queries running now (POST /api/query).",
		  offsetof(struct coll_metrics, queries_running), 1 },
	};
	struct coll_agent *a;

	prom_fields(f, cs, sizeof(cs) / sizeof(cs[0]), &c->m);
	prom_u64(f, "fay_collector_memory_bytes", "gauge",
		"Bytes peers make the collector hold now (frames in flight, HTTP bodies).",
		__atomic_load_n(&c->mem.used, __ATOMIC_RELAXED));
	prom_u64(f, "fay_collector_memory_peak_bytes", "gauge",
		"The most fay_collector_memory_bytes has been.",
		__atomic_load_n(&c->mem.peak, __ATOMIC_RELAXED));
	prom_u64(f, "fay_collector_memory_limit_bytes", "gauge", "--max-memory.", c->mem.max);
	prom_u64(f, "fay_collector_uptime_seconds", "gauge", "Seconds since start.",
		(clock_realtime_ns() / 1000 - c->started_us) / 1000000);
	prom_u64(f, "fay_collector_store_up", "gauge",
		"1 while the store answers (a ClickHouse server up), else 0.",
		store__health(c->store, NULL, 0) == 0);
	{
		struct store_disk d;

		store__disk(c->store, &d);
		prom_u64(f, "fay_collector_disk_low", "gauge",
			"1 while the store's disk is low (below --min-free): new spans are "
			"refused (agents keep them, HTTP 503) until the space is back.", d.low);
		if (d.total) {
			prom_u64(f, "fay_collector_disk_free_bytes", "gauge",
				"Free bytes on the store's file system.", d.avail);
			prom_u64(f, "fay_collector_disk_min_free_bytes", "gauge",
				"The free space the store keeps (--min-free, or its default).",
				d.min_free);
		}
	}

	pthread_mutex_lock(&c->agents_lock);
	prom_family(f, "fay_agent_spans_stored_total", "counter", "Spans stored per agent.");
	for (a = c->agents; a; a = a->next) {
		fprintf(f, "fay_agent_spans_stored_total{agent=\"%s\",host=\"", a->id);
		prom_label(f, a->host);
		fprintf(f, "\"} %" PRIu64 "\n", a->spans);
	}
	prom_family(f, "fay_agent_connected", "gauge", "Open connections per agent.");
	for (a = c->agents; a; a = a->next) {
		fprintf(f, "fay_agent_connected{agent=\"%s\",host=\"", a->id);
		prom_label(f, a->host);
		fprintf(f, "\"} %d\n", a->connected);
	}
	pthread_mutex_unlock(&c->agents_lock);
}
