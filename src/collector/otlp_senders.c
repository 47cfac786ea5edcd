// SPDX-License-Identifier: MIT
/*
 * Per-sender OTLP counters: requests, spans accepted and spans rejected
 * (invalid, or refused while the ingest queue was full) per client
 * address, for /metrics (fay_otlp_sender_*) and the Hosts page
 * (/api/ui/hosts "otlp_senders").  At most OTLP_MAX_SENDERS addresses
 * are kept; later ones are counted under "other".
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "collector/ext_http.h"
#include "collector/otlp_int.h"
#include "common/net.h"
#include "common/prom.h"

void otlp_addr_str(const struct sockaddr *sa, char *out, size_t outlen)
{
	net_addr_ip(sa, out, outlen);
	if (!strcmp(out, "?"))
		snprintf(out, outlen, "unknown");
}

void otlp_sender_count(struct collector *c, const char *sender, const struct otlp_outcome *o)
{
	struct coll_ext *e = c->ext;
	struct otlp_sender *s = NULL;

	if (!e)
		return;
	pthread_mutex_lock(&e->senders_lock);
	for (int i = 0; i < e->nsenders && !s; i++)
		if (!strcmp(e->senders[i].name, sender))
			s = &e->senders[i];
	if (!s && e->nsenders < OTLP_MAX_SENDERS) {
		s = &e->senders[e->nsenders++];
		snprintf(s->name, sizeof(s->name), "%s", sender);
	}
	if (!s) {
		s = &e->senders[OTLP_MAX_SENDERS];
		snprintf(s->name, sizeof(s->name), "other");
	}
	s->requests++;
	s->accepted += o->accepted;
	s->rejected += o->rejected;
	if (o->verdict != OTLP_ACCEPTED && o->verdict != OTLP_PARTIAL && !o->spans)
		s->refused++;
	pthread_mutex_unlock(&e->senders_lock);
}

/* The senders in use: e->senders[0..n) and "other" when it counted. */
static int senders_end(const struct coll_ext *e)
{
	return e->senders[OTLP_MAX_SENDERS].requests ? OTLP_MAX_SENDERS + 1 : e->nsenders;
}

void otlp_sender_metrics(struct collector *c, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} m[] = {
		{ "fay_otlp_sender_requests_total", "OTLP export requests per sender address.",
		  offsetof(struct otlp_sender, requests) },
		{ "fay_otlp_sender_spans_accepted_total", "OTLP spans stored per sender address.",
		  offsetof(struct otlp_sender, accepted) },
		{ "fay_otlp_sender_spans_rejected_total",
		  "OTLP spans not stored per sender address (invalid, or the ingest queue was full).",
		  offsetof(struct otlp_sender, rejected) },
		{ "fay_otlp_sender_requests_refused_total",
		  "OTLP requests per sender address refused whole before any span was read "
		  "(undecodable, too large).", offsetof(struct otlp_sender, refused) },
	};
	struct coll_ext *e = c->ext;

	if (!e)
		return;
	pthread_mutex_lock(&e->senders_lock);
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		prom_family(f, m[k].name, "counter", m[k].help);
		for (int i = 0; i < senders_end(e); i++)
			if (i < e->nsenders || i == OTLP_MAX_SENDERS)
				fprintf(f, "%s{sender=\"%s\"} %llu\n", m[k].name, e->senders[i].name,
					(unsigned long long)*(const uint64_t *)
					((const char *)&e->senders[i] + m[k].off));
	}
	pthread_mutex_unlock(&e->senders_lock);
}

json_t *otlp_senders_json(struct collector *c)
{
	struct coll_ext *e = c->ext;
	json_t *a = json_array();

	if (!e || !a)
		return a;
	pthread_mutex_lock(&e->senders_lock);
	for (int i = 0; i < senders_end(e); i++) {
		const struct otlp_sender *s = &e->senders[i];

		if (i >= e->nsenders && i != OTLP_MAX_SENDERS)
			continue;
		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I, s:I}", "sender", s->name,
			"requests", (json_int_t)s->requests, "spans_accepted",
			(json_int_t)s->accepted, "spans_rejected", (json_int_t)s->rejected,
			"requests_refused", (json_int_t)s->refused));
	}
	pthread_mutex_unlock(&e->senders_lock);
	return a;
}
