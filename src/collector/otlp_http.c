// SPDX-License-Identifier: MIT
/*
 * OTLP ingest whatever the transport (otlp_ingest(): decompress, decode
 * JSON or protobuf, map, store through the ingest queue, count), and its
 * HTTP answer, POST /v1/traces (OTLP/HTTP, on the Zipkin port and on
 * --otlp-http), following the OTLP specification:
 *
 *   200  every span stored: {} / an empty ExportTraceServiceResponse
 *   200  some spans invalid, or valid but their trace full in the store
 *        (SQLite: 2^20 spans a trace): partial_success {rejected_spans,
 *        error_message} (the others are stored)
 *   400  undecodable body, or no span valid: google.rpc.Status (protobuf)
 *        or {"code": 3, "message": ...} (JSON)
 *   413  over --max-body, before or after gzip
 *   415  neither application/json nor application/x-protobuf; unknown
 *        Content-Encoding
 *   429  the ingest queue is full (--ingest-queue): Retry-After: 1
 *   503  the store failed, or the gzip-decoded body or the decoded
 *        request did not fit in --max-memory: Retry-After: 1
 *
 * The answer is in the request's encoding.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "collector/otlp_int.h"
#include "common/log.h"
#include "common/zlib.h"

#define OTLP_RETRY_AFTER_S 1

void otlp_ingest(struct collector *c, const void *body, size_t len, int protobuf, int gzip,
		 const char *sender, struct otlp_outcome *o)
{
	struct store_batch b = { 0 };
	struct otlp_result res;
	struct otlp_req req;
	struct zarena a = { .budget = &c->mem };    /* the decoded request, charged */
	char *plain = NULL, err[512];
	size_t charged = 0;
	int ret;

	memset(o, 0, sizeof(*o));
	M_ADD(c, otlp_requests, 1);
	if (gzip) {
		ret = gunzip(&c->mem, body, len, c->max_body, &plain, &len, &charged, err,
			     sizeof(err));
		if (ret == -ENOBUFS) {
			/* busy, like a body that did not fit: no span judged */
			o->verdict = OTLP_FULL;
			snprintf(o->msg, sizeof(o->msg), "%s", err);
			M_ADD(c, http_busy, 1);
			M_ADD(c, otlp_rejected, 1);
			goto out;
		}
		if (ret) {
			o->verdict = ret == -E2BIG ? OTLP_TOO_BIG : ret == -ENOMEM ? OTLP_NOMEM : OTLP_BAD;
			snprintf(o->msg, sizeof(o->msg), "%s", err);
			goto refused;
		}
		body = plain;
	}
	ret = protobuf ? otlp_pb_decode(body ? body : "", len, &a, &req, err, sizeof(err)) :
			 otlp_json_decode(body ? body : "", len, &a, &req, err, sizeof(err));
	free(plain);
	mem_budget_give(&c->mem, charged);
	if (!ret)
		ret = otlp_map(&req, &a, &res);
	if (ret && a.over) {
		/* busy, like a body that did not fit: no span judged */
		o->verdict = OTLP_FULL;
		snprintf(o->msg, sizeof(o->msg), "the decoded request does not fit in --max-memory"
			 " (%zu bytes decoded so far): retry later", a.charged);
		M_ADD(c, http_busy, 1);
		M_ADD(c, otlp_rejected, 1);
		goto out;
	}
	if (ret) {
		o->verdict = ret == -ENOMEM ? OTLP_NOMEM : OTLP_BAD;
		snprintf(o->msg, sizeof(o->msg), "%s", ret == -ENOMEM ? "out of memory" : err);
		goto refused;
	}
	o->spans = res.nspans + res.rejected;
	o->rejected = res.rejected;
	M_ADD(c, spans_received, o->spans);
	M_ADD(c, otlp_spans, o->spans);
	if (res.rejected) {
		M_ADD(c, spans_rejected, res.rejected);
		M_ADD(c, http_spans_dropped, res.rejected);
		M_ADD(c, otlp_spans_rejected, res.rejected);
		snprintf(o->msg, sizeof(o->msg), "%zu of %zu spans rejected; the first: %s",
			 res.rejected, res.rejected + res.nspans, res.first_error);
		pr_debug("otlp: %s", o->msg);
	}
	if (!res.nspans) {
		o->verdict = res.rejected ? OTLP_BAD : OTLP_ACCEPTED;
		if (res.rejected)
			M_ADD(c, otlp_rejected, 1);
		goto out;
	}
	b.spans = res.spans;
	b.nspans = res.nspans;
	/* the store's share that needs no writer, here (out of memory: the
	 * writer does it) */
	(void)store__prepare(c->store, &b, &a);
	ret = ingest_try_write(c->ingest, &b, err, sizeof(err));
	if (ret) {
		o->verdict = ret == -EAGAIN ? OTLP_BUSY : OTLP_UNAVAILABLE;
		o->rejected = o->spans;
		snprintf(o->msg, sizeof(o->msg), "%s", err);
		M_ADD(c, http_spans_dropped, res.nspans);
		M_ADD(c, otlp_spans_rejected, res.nspans);
		M_ADD(c, otlp_rejected, 1);
		if (ret == -EAGAIN)
			M_ADD(c, otlp_throttled, 1);
		goto out;
	}
	M_ADD(c, spans_stored, b.stored);
	if (b.dropped) {
		/* valid, but their traces were full: the store kept none of them */
		o->rejected += b.dropped;
		M_ADD(c, spans_rejected, b.dropped);
		M_ADD(c, otlp_spans_rejected, b.dropped);
		if (!res.rejected)
			snprintf(o->msg, sizeof(o->msg), "%zu of %zu spans not stored: their trace"
				 " holds the most spans the store keeps a trace", b.dropped, o->spans);
	}
	o->accepted = res.nspans - b.dropped;
	o->verdict = o->rejected ? OTLP_PARTIAL : OTLP_ACCEPTED;
	goto out;
refused:
	M_ADD(c, otlp_rejected, 1);
	M_ADD(c, spans_rejected, 1);
	M_ADD(c, http_spans_dropped, 1);
	pr_debug("otlp: request refused: %s", o->msg);
out:
	zarena_reset(&a);
	otlp_sender_count(c, sender, o);
}

/* ---- the HTTP answer -------------------------------------------------------- */

static int answer(struct collector *c, struct http_con *con,
		  unsigned status, int protobuf, void *body, size_t len)
{
	struct http_resp *r;

	r = http_resp_buf(body ? body : strdup(""), len, 1);
	if (!r)
		return HTTPD_NO;
	http_resp_header(r, "Content-Type", protobuf ? "application/x-protobuf" :
				"application/json");
	if (status == 429 || status == 503)
		http_resp_header(r, "Retry-After", OTLP_RETRY_AFTER_S == 1 ? "1" : "2");
	if (status >= 400 && status < 500)
		M_ADD(c, http_bad_requests, 1);
	return http_resp_queue(con, status, r);
}

/* An error answer: google.rpc.Status or {"code", "message"}, with the
 * gRPC code the OTLP specification pairs with the status. */
static int refuse(struct collector *c, struct http_con *con,
		  unsigned status, int protobuf, const char *msg)
{
	int code = status == 400 ? 3 : status == 413 ? 8 : status == 401 ? 16 :
		   status == 429 ? 8 : status == 503 ? 14 : status == 415 ? 3 : 13;
	void *body = NULL;
	size_t len = 0;

	if (protobuf) {
		if (otlp_pb_status(code, msg, 0, &body, &len))
			return HTTPD_NO;
	} else {
		json_t *j = json_pack("{s:i, s:s}", "code", code, "message", msg);

		body = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		if (!body)
			return HTTPD_NO;
		len = strlen(body);
	}
	return answer(c, con, status, protobuf, body, len);
}

/* The client's address, the sender of per-sender counters. */
static void peer_of(struct http_con *con, char *out, size_t outlen)
{
	const struct sockaddr *peer = http_peer(con);

	snprintf(out, outlen, "unknown");
	if (peer)
		otlp_addr_str(peer, out, outlen);
}

int api_otlp(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const struct http_body *body = &rq->body;
	const char *type = http_header(con, "Content-Type");
	const char *enc = http_header(con, "Content-Encoding");
	int protobuf = type && strcasestr(type, "protobuf");
	struct otlp_outcome o;
	char msg[640], sender[64];
	void *out = NULL;
	size_t len = 0;

	if (body->too_big) {
		M_ADD(c, otlp_rejected, 1);
		snprintf(msg, sizeof(msg), "body: larger than the %zu-byte limit (--max-body)",
			 c->max_body);
		return refuse(c, con, 413, protobuf, msg);
	}
	if (type && !protobuf && !strcasestr(type, "json")) {
		M_ADD(c, otlp_rejected, 1);
		snprintf(msg, sizeof(msg), "Content-Type %.100s: expected application/x-protobuf "
			 "or application/json", type);
		return refuse(c, con, 415, 0, msg);
	}
	if (enc && strcasecmp(enc, "gzip") && strcasecmp(enc, "identity")) {
		M_ADD(c, otlp_rejected, 1);
		snprintf(msg, sizeof(msg), "Content-Encoding %.60s: only gzip is accepted", enc);
		return refuse(c, con, 415, protobuf, msg);
	}
	peer_of(con, sender, sizeof(sender));
	otlp_ingest(c, body->p, body->len, protobuf, enc && !strcasecmp(enc, "gzip"), sender, &o);
	switch (o.verdict) {
	case OTLP_ACCEPTED:
	case OTLP_PARTIAL:
		if (protobuf) {
			if (otlp_pb_response(o.rejected, o.msg, &out, &len))
				return HTTPD_NO;
		} else {
			json_t *j = o.rejected ?
				json_pack("{s:{s:s, s:s}}", "partialSuccess", "rejectedSpans",
					  "", "errorMessage", o.msg) : json_object();
			char num[24];

			snprintf(num, sizeof(num), "%llu", (unsigned long long)o.rejected);
			if (j && o.rejected)
				json_object_set_new(json_object_get(j, "partialSuccess"),
						    "rejectedSpans", json_string(num));
			out = j ? json_dumps(j, JSON_COMPACT) : NULL;
			json_decref(j);
			if (!out)
				return HTTPD_NO;
			len = strlen(out);
		}
		return answer(c, con, 200, protobuf, out, len);
	case OTLP_BAD:
		return refuse(c, con, 400, protobuf, o.msg);
	case OTLP_TOO_BIG:
		return refuse(c, con, 413, protobuf, o.msg);
	case OTLP_BUSY:
		return refuse(c, con, 429, protobuf, o.msg);
	case OTLP_UNAVAILABLE:
	case OTLP_FULL:
		return refuse(c, con, 503, protobuf, o.msg);
	default:
		return refuse(c, con, 500, protobuf, "out of memory");
	}
}
