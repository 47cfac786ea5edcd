// SPDX-License-Identifier: MIT
/*
 * fay query --cluster URL: send the query to a collector (POST
 * /api/query), which runs it on its agents and streams merged windows
 * back as NDJSON; print each one as `fay query` prints a local result
 * (the collector renders the table or the JSON lines: "format"), and
 * each window's completeness on standard error (with --json, also as a
 * JSON line after the window's rows); a stream's, after its rows.
 *
 * As locally, an aggregate without 'window' prints once, at the end; on
 * Ctrl-C the latest cumulative result is printed.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/query_run.h"
#include "cli/traces.h"
#include "common/lazy_curl.h"

struct cl_state {
	const struct cluster_run_opts *o;
	char *line;		/* a partial line */
	size_t len, cap;
	char *last;		/* the latest cumulative "text", shown at Ctrl-C */
	bool windowed, failed, ended, any;
	int status;		/* HTTP status */
	char *body;		/* a non-200 answer */
	size_t blen;
	char err[1024];
};

static volatile sig_atomic_t cl_stop;

static void on_sig(int sig)
{
	cl_stop = sig;
}

static const char *str_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void print_names(FILE *f, json_t *a)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v)
		fprintf(f, "%s%s", i ? ", " : "", json_is_string(v) ? json_string_value(v) : "?");
}

/* "fay: window 12:00:01Z: 3 of 3 hosts answered; missing: h2" */
static void completeness(const struct cl_state *s, json_t *j)
{
	json_t *h = json_object_get(j, "hosts"), *miss = json_object_get(h, "missing"),
	       *failed = json_object_get(h, "failed"), *dropped = json_object_get(j, "dropped");
	uint64_t t = (uint64_t)json_integer_value(json_object_get(j, "start_ns"));
	time_t sec = (time_t)(t / 1000000000ull);
	char when[64] = "result";
	struct tm tm;
	const char *k;
	json_t *v;

	if (s->o->quiet || !h)
		return;
	if (s->windowed) {
		gmtime_r(&sec, &tm);
		strftime(when, sizeof(when), "window %H:%M:%SZ", &tm);
	}
	fprintf(s->o->err, "fay: %s%s%s: %" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT
		" hosts answered", when,
		json_is_true(json_object_get(j, "amended")) ? " (amended)" : "",
		json_is_true(json_object_get(j, "provisional")) ? " (provisional)" : "",
		json_integer_value(json_object_get(h, "answered")),
		json_integer_value(json_object_get(h, "asked")));
	if (json_integer_value(json_object_get(h, "late")))
		fprintf(s->o->err, ", %" JSON_INTEGER_FORMAT " late",
			json_integer_value(json_object_get(h, "late")));
	if (json_array_size(miss)) {
		fputs("; missing: ", s->o->err);
		print_names(s->o->err, miss);
	}
	if (json_array_size(failed)) {
		fputs("; could not run it: ", s->o->err);
		print_names(s->o->err, failed);
	}
	fputc('\n', s->o->err);
	json_object_foreach(dropped, k, v)
		fprintf(s->o->err, "warning: %" JSON_INTEGER_FORMAT " %s (summed over hosts)\n",
			json_integer_value(v), k);
}

/* --json: after a window's rows (or the result's), its completeness as a
 * line of its own, for scripts (docs/QUERY.md):
 * {"window_start_ns":S,"window_end_ns":E,"final":false,"provisional":true,
 *  "amended":false,"hosts":{"asked":3,"answered":2,...},"dropped":{}} */
static void completeness_json(const struct cl_state *s, json_t *j)
{
	static const char *const keys[] = { "final", "provisional", "amended", "hosts", "dropped" };
	json_t *o = json_object(), *v;
	char *line;

	if (!o)
		return;
	if (s->windowed) {
		if ((v = json_object_get(j, "start_ns")))
			json_object_set(o, "window_start_ns", v);
		if ((v = json_object_get(j, "end_ns")))
			json_object_set(o, "window_end_ns", v);
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((v = json_object_get(j, keys[i])))
			json_object_set(o, keys[i], v);
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (line) {
		fputs(line, s->o->out);
		fputc('\n', s->o->out);
		free(line);
	}
	json_decref(o);
}

/* "fay: h1: attached after the query's time ran out: ..." for each host
 * a result's or a stream's end names so */
static void late_hosts(const struct cl_state *s, json_t *j)
{
	json_t *h;
	size_t i;

	if (s->o->quiet)
		return;
	json_array_foreach(json_object_get(j, "attached_after_end"), i, h)
		fprintf(s->o->err, "fay: %s: attached after the query's time ran out: it traced "
			"nothing (a longer 'for' leaves room for the attach)\n",
			json_is_string(h) ? json_string_value(h) : "?");
}

static void on_progress(struct cl_state *s, json_t *j)
{
	json_t *hosts = json_object_get(j, "hosts"), *h;
	size_t i;

	if (s->o->quiet)
		return;
	json_array_foreach(hosts, i, h) {
		const char *st = str_of(h, "state"), *info = str_of(h, "info");

		fprintf(s->o->err, "fay: %s: %s%s%s\n", str_of(h, "host"), st ? st : "?",
			info && *info ? ": " : "", info ? info : "");
	}
}

static void on_line(struct cl_state *s, const char *line, size_t len)
{
	json_t *j = json_loadb(line, len, 0, NULL);
	const char *type = j ? str_of(j, "type") : NULL, *text = j ? str_of(j, "text") : NULL;
	FILE *out = s->o->out;

	if (!type) {
		json_decref(j);
		return;
	}
	if (!strcmp(type, "columns")) {
		s->windowed = json_integer_value(json_object_get(j, "window_ms")) > 0;
	} else if (!strcmp(type, "progress")) {
		on_progress(s, j);
	} else if (!strcmp(type, "row")) {
		if (text)
			fputs(text, out);
		s->any = true;
	} else if (!strcmp(type, "window")) {
		bool final = json_is_true(json_object_get(j, "final"));

		if (s->windowed || final) {
			if (text) {
				fputs(text, out);
				if (s->windowed && !s->o->json)
					fputc('\n', out);
			}
			if (final)
				late_hosts(s, j);
			if (s->o->json)
				completeness_json(s, j);
			completeness(s, j);
		} else if (text) {
			free(s->last);
			s->last = strdup(text);
		}
		if (final && !s->windowed) {
			free(s->last);
			s->last = NULL;
		}
		s->any = true;
	} else if (!strcmp(type, "stream_end")) {
		/* a stream's completeness, after its rows: a stream that
		 * brought none still says which hosts it heard */
		late_hosts(s, j);
		if (s->o->json)
			completeness_json(s, j);
		completeness(s, j);
		s->any = true;
	} else if (!strcmp(type, "error")) {
		snprintf(s->err, sizeof(s->err), "%s", str_of(j, "error") ? str_of(j, "error") : "?");
		s->failed = true;
	} else if (!strcmp(type, "end")) {
		s->ended = true;
	}
	fflush(out);
	json_decref(j);
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct cl_state *s = arg;
	size_t add = size * n;

	if (s->status && s->status != 200) {
		char *nb = realloc(s->body, s->blen + add + 1);

		if (!nb)
			return 0;
		memcpy(nb + s->blen, p, add);
		s->blen += add;
		nb[s->blen] = '\0';
		s->body = nb;
		return add;
	}
	for (size_t i = 0; i < add; i++) {
		if (p[i] == '\n') {
			on_line(s, s->line ? s->line : "", s->len);
			s->len = 0;
			continue;
		}
		if (s->len + 1 >= s->cap) {
			size_t nc = s->cap ? 2 * s->cap : 4096;
			char *nl = nc <= (64u << 20) ? realloc(s->line, nc) : NULL;

			if (!nl)
				return 0;
			s->line = nl;
			s->cap = nc;
		}
		s->line[s->len++] = p[i];
	}
	return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct cl_state *s = arg;
	int code;

	if (size * n > 9 && !strncmp(p, "HTTP/", 5) && sscanf(p, "HTTP/%*s %d", &code) == 1)
		s->status = code;
	return size * n;
}

static int on_progress_cb(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	return cl_stop ? 1 : 0;
}

/* A 4xx answer: the query's diagnostic (exit 2) or the message (1). */
static int http_failure(struct cl_state *s)
{
	json_t *j = s->body ? json_loads(s->body, 0, NULL) : NULL;
	const char *diag = j ? str_of(j, "diagnostic") : NULL, *e = j ? str_of(j, "error") : NULL;
	int rc = s->status == 400 && diag && *diag ? 2 : 1;

	if (diag && *diag)
		fputs(diag, s->o->err);
	else
		fprintf(s->o->err, "error: the collector answered %d: %s%s", s->status,
			e ? e : s->body ? s->body : "",
			(e || (s->body && s->blen && s->body[s->blen - 1] != '\n')) ? "\n" : "");
	json_decref(j);
	return rc;
}

/* The collector's URL for path (PATH starts with '/'), into url. */
static void url_of(const struct cluster_run_opts *o, const char *path, char *url, size_t len)
{
	size_t ul = strlen(o->url);

	snprintf(url, len, "%s%.*s%s", strncmp(o->url, "http", 4) ? "http://" : "",
		 (int)(ul && o->url[ul - 1] == '/' ? ul - 1 : ul), o->url, path);
}

/* One request with a JSON body (or none); the answer in r. */
static int call(const struct cluster_run_opts *o, const char *method, const char *url,
		const char *body, struct tr_http_resp *r)
{
	char err[CURL_ERROR_SIZE + 600];

	if (tr_http(method, url, body, o->token, r, err, sizeof(err))) {
		fprintf(o->err, "error: %s: %s\n", url, err);
		return -1;
	}
	return 0;
}

int cluster_keep(const char *text, const char *name, const struct cluster_run_opts *o)
{
	struct tr_http_resp s = { 0 };
	json_t *b = json_pack("{s:s, s:s}", "name", name, "query", text);
	char url[2048], *bs;
	int rc = 1;

	if (b && o->grace_ns)
		json_object_set_new(b, "grace_ms", json_integer((json_int_t)(o->grace_ns / 1000000)));
	bs = b ? json_dumps(b, JSON_COMPACT) : NULL;
	json_decref(b);
	url_of(o, "/api/queries", url, sizeof(url));
	if (bs && !call(o, "POST", url, bs, &s)) {
		if (s.status == 201) {
			url_of(o, "/api/queries/", url, sizeof(url));
			fprintf(o->out, "standing query %s: runs until fay query --cluster %s --drop %s\n"
				"  history: %s%s/results\n  metrics: fay_query_%s on %s/metrics\n",
				name, o->url, name, url, name, name, o->url);
			rc = 0;
		} else {
			json_t *j = s.body ? json_loads(s.body, 0, NULL) : NULL;
			const char *e = json_string_value(json_object_get(j, "error"));

			fprintf(o->err, "%s%s%s", e && strstr(e, ": error: ") ? "" : "error: ",
				e ? e : s.body ? s.body : "?",
				e && e[0] && e[strlen(e) - 1] == '\n' ? "" : "\n");
			rc = s.status == 400 ? 2 : 1;
			json_decref(j);
		}
	}
	free(bs);
	free(s.body);
	return rc;
}

int cluster_drop(const char *name, const struct cluster_run_opts *o)
{
	struct tr_http_resp s = { 0 };
	char url[2048], path[128];
	int rc = 1;

	snprintf(path, sizeof(path), "/api/queries/%s", name);
	url_of(o, path, url, sizeof(url));
	if (!call(o, "DELETE", url, NULL, &s)) {
		if (s.status == 200) {
			fprintf(o->out, "standing query %s dropped\n", name);
			rc = 0;
		} else {
			fprintf(o->err, "error: %s", s.body ? s.body : "?\n");
		}
	}
	free(s.body);
	return rc;
}

int cluster_run_query(const char *text, const struct cluster_run_opts *o)
{
	struct cl_state s = { .o = o };
	struct curl_slist *hdr = NULL;
	struct sigaction sa = { .sa_handler = on_sig }, old[2];
	char url[2048], ebuf[CURL_ERROR_SIZE] = "", err[512];
	json_t *body;
	char *bs;
	CURL *c;
	CURLcode rc;
	int ret = 1;
	size_t ul = strlen(o->url);

	if (lazy_curl_load(err, sizeof(err))) {
		fprintf(o->err, "error: %s\n", err);
		return 1;
	}
	snprintf(url, sizeof(url), "%s%s%sapi/query", strncmp(o->url, "http", 4) ? "http://" : "",
		 o->url, ul && o->url[ul - 1] == '/' ? "" : "/");
	body = json_pack("{s:s, s:s, s:b}", "query", text, "format",
			 o->json ? "json" : o->folded ? "folded" : o->tree ? "tree" : "table",
			 "cluster", 1);
	if (body && o->grace_ns)
		json_object_set_new(body, "grace_ms", json_integer((json_int_t)(o->grace_ns / 1000000)));
	bs = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!bs || curl_global_init(CURL_GLOBAL_DEFAULT) || !(c = curl_easy_init())) {
		free(bs);
		fprintf(o->err, "error: out of memory\n");
		return 1;
	}
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	if (o->token) {
		char auth[600];

		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o->token);
		hdr = curl_slist_append(hdr, auth);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	tr_http_tls(c);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, bs);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress_cb);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "fay-query");

	cl_stop = 0;
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	rc = curl_easy_perform(c);
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);

	if (s.status && s.status != 200) {
		ret = http_failure(&s);
	} else if (rc != CURLE_OK && !(rc == CURLE_ABORTED_BY_CALLBACK && cl_stop)) {
		fprintf(o->err, "error: %s: %s\n", url, ebuf[0] ? ebuf : curl_easy_strerror(rc));
	} else if (s.failed) {
		fprintf(o->err, "error: %s\n", s.err);
	} else {
		if (s.last)	/* interrupted: the latest cumulative result */
			fputs(s.last, o->out);
		if (!s.ended && !cl_stop)
			fprintf(o->err, "error: the collector closed the stream before the query ended\n");
		ret = s.ended || cl_stop ? 0 : 1;
	}
	fflush(o->out);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	curl_global_cleanup();
	free(bs);
	free(s.line);
	free(s.last);
	free(s.body);
	return ret;
}
