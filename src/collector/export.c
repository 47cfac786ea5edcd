// SPDX-License-Identifier: MIT
/*
 * Forwarding to external backends: `fay collector --export zipkin=URL`
 * POSTs Zipkin v2 JSON (to a Zipkin's /api/v2/spans), `--export otlp=URL`
 * OTLP/HTTP JSON and `--export otlp-protobuf=URL` OTLP/HTTP protobuf (to
 * a collector's /v1/traces), with libcurl.
 *
 * The ingest thread hands every committed span to each exporter
 * (exporter_push: a copy, zspan_dup(), into a bounded ring, never blocking
 * the store).  A batch is encoded from the span model when it is sent:
 * Zipkin v2 JSON by zjson_spans(), OTLP by src/otlp
 * (otlp_req_from_zspans(), then otlp_json_encode() or otlp_pb_encode()).
 * Each exporter has a thread that sends a batch when EXPORT_BATCH spans
 * are waiting or every EXPORT_FLUSH_MS, and retries a failed POST (network
 * error or non-2xx) EXPORT_RETRIES times with doubling waits before it
 * drops the batch.  Everything is counted: sent, retried, failed (dropped
 * after the retries), dropped because the queue was full.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/export.h"
#include "collector/zjson.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/lazy_curl.h"
#include "common/log.h"
#include "common/prom.h"
#include "otlp/otlp.h"

#define EXPORT_BATCH     500
#define EXPORT_FLUSH_MS  1000
#define EXPORT_QUEUE_MAX 100000
#define EXPORT_RETRIES   3
#define EXPORT_TIMEOUT_S 10

struct exporter {
	enum export_kind kind;
	char *url;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct zspan **queue;       /* a ring of EXPORT_QUEUE_MAX span copies */
	size_t head, n;             /* the oldest, how many are waiting */
	int stop;
	/* counters (under lock or relaxed atomics) */
	uint64_t sent, failed, queue_dropped, requests, retries, errors;
	long last_status;
};

static const char *kind_name(const struct exporter *x)
{
	return x->kind == EXPORT_OTLP ? "otlp" : x->kind == EXPORT_OTLP_PROTOBUF ?
	       "otlp-protobuf" : "zipkin";
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	return size * n;
}

/* One POST of body; 0 on a 2xx answer, else -EIO (status in *status). */
static int post(struct exporter *x, CURL *curl, const void *body, size_t len, long *status)
{
	struct curl_slist *h = curl_slist_append(NULL, x->kind == EXPORT_OTLP_PROTOBUF ?
		"Content-Type: application/x-protobuf" : "Content-Type: application/json");
	CURLcode rc;

	curl_easy_reset(curl);
	curl_easy_setopt(curl, CURLOPT_URL, x->url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)EXPORT_TIMEOUT_S);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
	rc = curl_easy_perform(curl);
	*status = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(h);
	__atomic_add_fetch(&x->requests, 1, __ATOMIC_RELAXED);
	if (rc != CURLE_OK) {
		pr_debug("export %s: %s: %s", kind_name(x), x->url, curl_easy_strerror(rc));
		return -EIO;
	}
	return *status >= 200 && *status < 300 ? 0 : -EIO;
}

/* The body of n spans in x's format (malloc'ed); NULL when out of memory. */
static void *encode(const struct exporter *x, const struct zspan *s, size_t n, size_t *len)
{
	void *body = NULL;

	if (x->kind == EXPORT_ZIPKIN) {
		json_t *doc = zjson_spans(s, n);

		body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		*len = body ? strlen(body) : 0;
		json_decref(doc);
	} else {
		struct zarena a = { 0 };
		struct otlp_req r;
		char *text;

		if (!otlp_req_from_zspans(s, n, &a, &r)) {
			if (x->kind == EXPORT_OTLP_PROTOBUF) {
				if (otlp_pb_encode(&r, &body, len))
					body = NULL;
			} else if (!otlp_json_encode(&r, &text, len)) {
				body = text;
			}
		}
		zarena_reset(&a);
	}
	return body;
}

/* Send the n spans, retrying; counts the outcome. */
static void send_batch(struct exporter *x, CURL *curl, const struct zspan *s, size_t n,
		       int stopping)
{
	size_t len = 0;
	void *body = encode(x, s, n, &len);
	unsigned wait_ms = 250;
	long status = 0;
	int ret = -ENOMEM;

	for (int attempt = 0; body && attempt <= EXPORT_RETRIES; attempt++) {
		ret = post(x, curl, body, len, &status);
		x->last_status = status;
		if (!ret || stopping)
			break;
		/* 4xx other than 408/429: the backend refuses this body */
		if (status >= 400 && status < 500 && status != 408 && status != 429)
			break;
		if (attempt < EXPORT_RETRIES) {
			struct timespec ts = { wait_ms / 1000, (long)(wait_ms % 1000) * 1000000 };

			__atomic_add_fetch(&x->retries, 1, __ATOMIC_RELAXED);
			nanosleep(&ts, NULL);
			wait_ms *= 2;
		}
	}
	free(body);
	if (ret) {
		__atomic_add_fetch(&x->failed, n, __ATOMIC_RELAXED);
		__atomic_add_fetch(&x->errors, 1, __ATOMIC_RELAXED);
		pr_warn("export %s: %zu spans to %s dropped after %d attempts (last status %ld)",
			kind_name(x), n, x->url, stopping ? 1 : EXPORT_RETRIES + 1, status);
	} else {
		__atomic_add_fetch(&x->sent, n, __ATOMIC_RELAXED);
	}
}

/*
 * Take the n oldest spans waiting (x->lock held): their copies move to
 * blocks[0, n) (the caller frees them) and the spans to batch[0, n), a
 * contiguous array the encoders read.  The ring's head moves: O(n), where
 * json_array_remove(q, 0) per span once moved the whole queue under the
 * lock exporter_push() takes on the ingest thread.
 */
static void take(struct exporter *x, size_t n, struct zspan **blocks, struct zspan *batch)
{
	for (size_t i = 0; i < n; i++) {
		blocks[i] = x->queue[(x->head + i) % EXPORT_QUEUE_MAX];
		if (batch)
			batch[i] = *blocks[i];
	}
	x->head = (x->head + n) % EXPORT_QUEUE_MAX;
	x->n -= n;
}

static void *export_main(void *arg)
{
	struct exporter *x = arg;
	CURL *curl = curl_easy_init();
	struct zspan *blocks[EXPORT_BATCH];
	struct zspan *batch = malloc(sizeof(*batch) * EXPORT_BATCH);

	pthread_mutex_lock(&x->lock);
	for (;;) {
		size_t n;

		if (!x->stop && x->n < EXPORT_BATCH) {
			struct timespec ts;
			uint64_t ns = clock_realtime_ns() + EXPORT_FLUSH_MS * 1000000ull;

			ts.tv_sec = (time_t)(ns / 1000000000u);
			ts.tv_nsec = (long)(ns % 1000000000u);
			pthread_cond_timedwait(&x->wake, &x->lock, &ts);
		}
		n = x->n;
		if (!n) {
			if (x->stop)
				break;
			continue;
		}
		if (n > EXPORT_BATCH)
			n = EXPORT_BATCH;
		take(x, n, blocks, batch);
		pthread_mutex_unlock(&x->lock);
		if (batch && curl)
			send_batch(x, curl, batch, n, x->stop);
		else    /* out of memory: these spans are lost (failed) */
			__atomic_add_fetch(&x->failed, n, __ATOMIC_RELAXED);
		for (size_t i = 0; i < n; i++)
			free(blocks[i]);
		pthread_mutex_lock(&x->lock);
	}
	pthread_mutex_unlock(&x->lock);
	curl_easy_cleanup(curl);
	free(batch);
	return NULL;
}

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct exporter *exporter_new(enum export_kind kind, const char *url)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct exporter *x;
	char err[320];

	if (lazy_curl_load(err, sizeof(err))) {
		pr_err("export %s: %s", url, err);
		return fay_err_ptr(-ELIBACC);
	}
	pthread_once(&once, curl_init_once);
	x = calloc(1, sizeof(*x));
	if (!x)
		return fay_err_ptr(-ENOMEM);
	x->kind = kind;
	x->url = strdup(url);
	x->queue = malloc(sizeof(*x->queue) * EXPORT_QUEUE_MAX);
	if (!x->url || !x->queue) {
		free(x->url);
		free(x->queue);
		free(x);
		return fay_err_ptr(-ENOMEM);
	}
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->wake, NULL);
	if (pthread_create(&x->thread, NULL, export_main, x)) {
		pthread_mutex_destroy(&x->lock);
		pthread_cond_destroy(&x->wake);
		free(x->url);
		free(x->queue);
		free(x);
		return fay_err_ptr(-EAGAIN);
	}
	pr_info("collector: exporting spans as %s to %s", kind_name(x), url);
	return x;
}

void exporter_free(struct exporter *x)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	x->stop = 1;
	pthread_cond_signal(&x->wake);
	pthread_mutex_unlock(&x->lock);
	pthread_join(x->thread, NULL);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->wake);
	for (size_t i = 0; i < x->n; i++)
		free(x->queue[(x->head + i) % EXPORT_QUEUE_MAX]);
	free(x->queue);
	free(x->url);
	free(x);
}

void exporter_push(struct exporter *x, const struct zspan *s, size_t n)
{
	size_t dropped = 0;

	pthread_mutex_lock(&x->lock);
	for (size_t i = 0; i < n; i++) {
		struct zspan *d = x->n < EXPORT_QUEUE_MAX ? zspan_dup(&s[i]) : NULL;

		if (!d) {       /* full, or out of memory */
			dropped++;
			continue;
		}
		x->queue[(x->head + x->n++) % EXPORT_QUEUE_MAX] = d;
	}
	if (x->n >= EXPORT_BATCH)
		pthread_cond_signal(&x->wake);
	pthread_mutex_unlock(&x->lock);
	if (dropped)
		__atomic_add_fetch(&x->queue_dropped, dropped, __ATOMIC_RELAXED);
}

void exporter_metrics(struct exporter *const *xs, int n, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} cs[] = {
		{ "fay_export_spans_sent_total", "Spans the backend accepted (2xx).",
		  offsetof(struct exporter, sent) },
		{ "fay_export_spans_failed_total", "Spans dropped after every retry failed.",
		  offsetof(struct exporter, failed) },
		{ "fay_export_spans_queue_dropped_total", "Spans dropped because the export queue was full.",
		  offsetof(struct exporter, queue_dropped) },
		{ "fay_export_requests_total", "POSTs to the backend, retries included.",
		  offsetof(struct exporter, requests) },
		{ "fay_export_retries_total", "POSTs retried after a failure.",
		  offsetof(struct exporter, retries) },
	};

	if (!n)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cs); i++) {
		prom_family(f, cs[i].name, "counter", cs[i].help);
		for (int k = 0; k < n; k++)
			fprintf(f, "%s{exporter=\"%s\",url=\"%s\"} %" PRIu64 "\n", cs[i].name,
				kind_name(xs[k]), xs[k]->url,
				__atomic_load_n((uint64_t *)((char *)xs[k] + cs[i].off),
						__ATOMIC_RELAXED));
	}
	prom_family(f, "fay_export_queue_spans", "gauge", "Spans waiting to be exported.");
	for (int k = 0; k < n; k++) {
		size_t waiting;

		pthread_mutex_lock(&xs[k]->lock);
		waiting = xs[k]->n;
		pthread_mutex_unlock(&xs[k]->lock);
		fprintf(f, "fay_export_queue_spans{exporter=\"%s\",url=\"%s\"} %zu\n",
			kind_name(xs[k]), xs[k]->url, waiting);
	}
}
