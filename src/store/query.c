// SPDX-License-Identifier: MIT
/*
 * Backend-neutral halves of a trace query: Zipkin's annotationQuery
 * parser and QueryRequest.test(), which decides whether a whole trace
 * matches.  A backend narrows the candidates with its indexes and lets
 * store_query_test() have the last word, so every backend answers alike.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "store/store.h"

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

static int aq_find(const struct store_query *q, const char *key)
{
	for (unsigned i = 0; i < q->naq; i++)
		if (!strcmp(q->aq[i].key, key))
			return (int)i;
	return -1;
}

int store_query_parse_aq(struct store_query *q, char *s, char *err, size_t errlen)
{
	char *term = s, *next;

	q->naq = 0;
	if (!s || !*s)
		return 0;
	for (; term; term = next) {
		char *eq, *key, *val = NULL;
		int at;

		next = strstr(term, " and ");
		if (next) {
			*next = '\0';
			next += 5;
		}
		eq = strchr(term, '=');
		if (eq) {
			*eq = '\0';
			val = trim(eq + 1);
		}
		key = trim(term);
		if (!*key) {
			snprintf(err, errlen, "annotationQuery: empty term%s",
				 val ? " before '='" : "");
			return -EINVAL;
		}
		at = aq_find(q, key);
		if (at >= 0) {
			/* key=value wins over a bare key; the last value wins */
			if (val)
				q->aq[at].value = val;
			continue;
		}
		if (q->naq == ARRAY_SIZE(q->aq)) {
			snprintf(err, errlen, "annotationQuery: more than %zu terms",
				 ARRAY_SIZE(q->aq));
			return -EINVAL;
		}
		q->aq[q->naq].key = key;
		q->aq[q->naq].value = val && *val ? val : NULL;
		q->naq++;
	}
	return 0;
}

uint64_t store_trace_ts(const struct zspan *spans, size_t n)
{
	uint64_t ts = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t t = spans[i].timestamp_us;

		if (!t)
			continue;
		if (!spans[i].parent_id)
			return t;
		if (!ts || t < ts)
			ts = t;
	}
	return ts;
}

static int str_is(struct zs_str s, const char *c)
{
	return c && zs_str_eqc(s, c);
}

static uint64_t ms_to_us(uint64_t ms)
{
	return ms > (uint64_t)INT64_MAX / 1000 ? (uint64_t)INT64_MAX : ms * 1000;
}

void store_query_window(const struct store_query *q, uint64_t *begin_us, uint64_t *end_us)
{
	uint64_t lb = q->lookback_ms < q->end_ts_ms ? q->lookback_ms : q->end_ts_ms;

	*end_us = ms_to_us(q->end_ts_ms);
	*begin_us = ms_to_us(q->end_ts_ms - lb);
}

int store_query_test(const struct store_query *q, const struct zspan *spans, size_t n)
{
	uint64_t ts = store_trace_ts(spans, n);
	int service_ok = !q->service, remote_ok = !q->remote_service;
	int name_ok = !q->span_name;
	int dur_ok = !q->min_duration_us && !q->max_duration_us;
	uint64_t lo, hi;
	uint32_t aq_left = q->naq ? (UINT32_C(1) << q->naq) - 1 : 0;

	store_query_window(q, &lo, &hi);
	if (q->naq > 31)
		return 0;
	if (!ts || ts < lo || ts > hi)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct zspan *s = &spans[i];

		/* a service name, when given, constrains everything else */
		if (q->service && !str_is(s->local.service, q->service))
			continue;
		service_ok = 1;
		for (unsigned k = 0; k < q->naq; k++) {
			if (!(aq_left & (1u << k)))
				continue;
			if (!q->aq[k].value) {
				for (uint32_t j = 0; j < s->nannotations; j++)
					if (str_is(s->annotations[j].value, q->aq[k].key))
						aq_left &= ~(1u << k);
			}
			for (uint32_t j = 0; j < s->ntags; j++) {
				if (!str_is(s->tags[j].key, q->aq[k].key))
					continue;
				if (!q->aq[k].value || str_is(s->tags[j].value, q->aq[k].value))
					aq_left &= ~(1u << k);
			}
		}
		if (!remote_ok && str_is(s->remote.service, q->remote_service))
			remote_ok = 1;
		if (!name_ok && str_is(s->name, q->span_name))
			name_ok = 1;
		if (!dur_ok && q->min_duration_us) {
			dur_ok = s->duration_us >= q->min_duration_us &&
				 (!q->max_duration_us || s->duration_us <= q->max_duration_us);
		}
	}
	return service_ok && remote_ok && name_ok && !aq_left && dur_ok;
}

int store_trace_newer(const void *x, const void *y)
{
	const struct store_trace *a = x, *b = y;
	uint64_t ahi = a->n ? a->spans[0].trace_hi : 0, alo = a->n ? a->spans[0].trace_lo : 0;
	uint64_t bhi = b->n ? b->spans[0].trace_hi : 0, blo = b->n ? b->spans[0].trace_lo : 0;

	if (a->ts_us != b->ts_us)
		return a->ts_us > b->ts_us ? -1 : 1;
	if (ahi != bhi)
		return ahi < bhi ? -1 : 1;
	return alo < blo ? -1 : alo > blo;
}
