// SPDX-License-Identifier: MIT
/*
 * Captures of probe events (#22 item 4): a standing query in keep mode
 * ('... keep 30s', docs/QUERY.md) keeps its events on each host instead
 * of sending them; POST /api/captures {"query":NAME, "last_ms":N,
 * "host":H} asks every agent (through the query connections, as a
 * capture of spans does: cluster_capture_run(), CAPTURE kind QUERY with
 * the key of NAME's text) for the events that arrived in the last N ms,
 * writes them to DIR/ID.events.jsonl, one a line:
 *     {"host":"h1","t_ns":ARRIVAL,"event":{the query's columns}}
 * and answers with the capture's account, listed with the others (GET
 * /api/captures): hosts asked and answered, events found, and each
 * host's events, the events its buffers held, and how many they had
 * overwritten (their memory bound) when asked ("events_overwritten").  A
 * host that keeps no events of NAME (it joined after, or its agent
 * restarted) is "not keeping it"; one that does not answer is "missing".
 * GET /api/captures/ID/events sends the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "collector/http_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wire_cluster.h"
#include "engine/driver.h"
#include "query/partial.h"

#define CAPQ_LAST_MAX_MS	(24ull * 3600 * 1000)

/* Write host h's events (a CAPTURED's BATCH payload of u64 arrival, then
 * the columns) as lines to f.  The number written, or -errno with err. */
static long write_host(const struct plan *p, const struct cluster_capture_host *h, FILE *f,
		       char *err, size_t errlen)
{
	struct engine_out eo = { .json = true };
	struct wire_batch_rd rd;
	unsigned char *rec;
	const uint8_t *r;
	char *line = NULL;
	size_t linelen = 0;
	uint32_t rl;
	long n = 0;
	int ret;

	if (!h->len || wire_batch_open(&rd, h->spans, (uint32_t)h->len, 0, err, errlen))
		return 0;
	rec = calloc(1, (size_t)p->record_size + 1);
	eo.f = open_memstream(&line, &linelen);
	if (!rec || !eo.f) {
		free(rec);
		if (eo.f)
			fclose(eo.f);
		free(line);
		return -ENOMEM;
	}
	while ((ret = wire_batch_next(&rd, &r, &rl, err, errlen)) > 0) {
		struct rbuf b;
		uint64_t t;

		rbuf_init(&b, r, rl);
		t = rbuf_le64(&b, "arrival");
		if (b.err || partial_record_decode(p, &b, rec) || b.off != b.len) {
			snprintf(err, errlen, "event %ld: a record that does not fit the query", n);
			ret = -EBADMSG;
			break;
		}
		rewind(eo.f);
		engine_print_record(p, &eo, rec);
		fflush(eo.f);
		while (linelen && line[linelen - 1] == '\n')
			linelen--;
		fprintf(f, "{\"host\":\"%s\",\"t_ns\":%" PRIu64 ",\"event\":%.*s}\n", h->host, t,
			(int)linelen, line);
		n++;
	}
	fclose(eo.f);
	free(line);
	free(rec);
	return ret < 0 ? ret : n;
}

/* Is host one of hosts[0..n) (n 0: every host is)? */
static bool host_in(const char *host, const char *const *hosts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(host, hosts[i]))
			return true;
	return !n;
}

json_t *capture_query_make(struct collector *c, const char *name, uint64_t from_ns,
			   uint64_t to_ns, const char *const *hosts, size_t nhosts, const char *by,
			   int *status, char *err, size_t errlen)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct cluster_capture_req cr = { .kind = WIRE_CK_QUERY, .from_ns = from_ns,
					   .to_ns = to_ns, .host = nhosts == 1 ? hosts[0] : NULL };
	struct cluster_capture_res res;
	uint64_t now = clock_realtime_ns(), found = 0, over = 0, wire = 0;
	char id[48], at[64], path[4300], tmp[4400], bybuf[300];
	unsigned asked = 0, answered = 0;
	const struct plan *p;
	json_t *jh, *acc;
	struct query *q;
	char *text;
	FILE *f;

	*status = 500;
	text = c->standing ? standing_text(c->standing, name) : NULL;
	if (!text) {
		*status = errno == ENOMEM ? 500 : 404;
		snprintf(err, errlen, "no standing query named %s", name);
		return NULL;
	}
	q = engine_plan_text("<standing query>", text, strlen(text), &qo, &p, err, errlen);
	if (q && (p->mode != PLAN_STREAM || !p->keep_ns)) {
		*status = 400;
		snprintf(err, errlen, "standing query %s is not in keep mode ('... keep DUR'): "
			 "its hosts keep no events", name);
		query_free(q);
		q = NULL;
	}
	cr.trace_lo = wire_query_key(text, strlen(text));
	free(text);
	if (!q)
		return NULL;
	capture_new_id(c, now, id, sizeof(id), at, sizeof(at));
	if (!by) {
		snprintf(bybuf, sizeof(bybuf), "query %s last %" PRIu64 "ms", name,
			 (to_ns - from_ns) / 1000000u);
		by = bybuf;
	}
	if (caplog_events_path(c, id, path, sizeof(path))) {
		snprintf(err, errlen, "this collector has no capture directory to keep events in");
		query_free(q);
		return NULL;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f || cluster_capture_run(c->cluster, &cr, &res)) {
		snprintf(err, errlen, "%s: %s", tmp, f ? "out of memory" : strerror(errno));
		if (f) {
			fclose(f);
			cluster_capture_res_free(&res);
		}
		unlink(tmp);
		query_free(q);
		return NULL;
	}
	jh = json_array();
	for (size_t i = 0; jh && i < res.n; i++) {
		const struct cluster_capture_host *h = &res.h[i];
		long n = 0;
		json_t *o;

		if (h->state == CCH_NOHOST || !host_in(h->host, hosts, nhosts))
			continue;
		asked += h->state != CCH_UNSUPPORTED;
		answered += h->state == CCH_ANSWERED || h->state == CCH_OFF;
		wire += h->wire_bytes;
		if (h->state == CCH_ANSWERED) {
			char why[512] = "";

			over += h->lost;
			n = write_host(p, h, f, why, sizeof(why));
			if (n < 0) {
				pr_warn("capture %s: the events of %s: %s", id, h->host,
					why[0] ? why : strerror((int)-n));
				n = 0;
			}
			found += (uint64_t)n;
		}
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "host", h->host,
			      "state", h->state == CCH_OFF ? "not keeping it" :
			      capture_state_name(h->state),
			      "events", (json_int_t)n, "held", (json_int_t)h->held,
			      "overwritten", (json_int_t)h->lost,
			      "oldest_ms", (json_int_t)(h->oldest_ns / 1000000u), "cut", h->cut);
		if (o && h->via[0])
			json_object_set_new(o, "via", json_string(h->via));
		json_array_append_new(jh, o);
	}
	cluster_capture_res_free(&res);
	query_free(q);
	if (fclose(f) || !jh || rename(tmp, path)) {
		snprintf(err, errlen, "%s: %s", path, jh ? strerror(errno) : "out of memory");
		unlink(tmp);
		json_decref(jh);
		return NULL;
	}
	if (!nhosts)
		capture_add_unconnected(c, jh, NULL);
	for (size_t i = 0; i < nhosts; i++)
		capture_add_unconnected(c, jh, hosts[i]);
	acc = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:I, s:I, s:o}",
		"id", id, "at", at, "by", by, "query", name, "at_ms", (json_int_t)(now / 1000000u),
		"hosts_asked", (int)asked, "hosts_answered", (int)answered,
		"events_found", (json_int_t)found, "events_overwritten", (json_int_t)over,
		"wire_bytes", (json_int_t)wire, "hosts", jh);
	if (!acc) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pr_info("capture %s (%s): %u hosts asked, %u answered, %" PRIu64 " events found, %"
		PRIu64 " overwritten before", id, by, asked, answered, found, over);
	capture_list_put(c, acc);
	*status = 200;
	return acc;
}

int capture_query_post(struct collector *c, struct http_con *con, json_t *body)
{
	json_t *n = json_object_get(body, "query"), *l = json_object_get(body, "last_ms");
	json_t *h = json_object_get(body, "host"), *acc;
	uint64_t now = clock_realtime_ns(), ms;
	const char *host;
	char err[4096] = "";
	int status;

	if (!json_is_string(n) || !json_string_length(n) || !json_is_integer(l) ||
	    json_integer_value(l) <= 0 || (uint64_t)json_integer_value(l) > CAPQ_LAST_MAX_MS ||
	    (h && !json_is_string(h)) || json_object_get(body, "trace_id"))
		return reply_text(c, con, 400, "want {\"query\": NAME (a standing query in keep "
				  "mode), \"last_ms\": 1 to 86400000, \"host\": H (optional)}\n");
	ms = (uint64_t)json_integer_value(l);
	host = h && json_string_length(h) ? json_string_value(h) : NULL;
	acc = capture_query_make(c, json_string_value(n), now - ms * 1000000u, now, &host,
				 host ? 1 : 0, NULL, &status, err, sizeof(err));
	if (!acc)
		return reply_text(c, con, status, "%s\n", err);
	return reply_json_status(c, con, status, acc);
}

int capture_query_events(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const char *rest = rq->url + strlen("/api/captures/");
	const char *slash = strchr(rest, '/');
	char id[48], path[4300];
	struct stat st;
	char *buf;
	ssize_t got;
	int fd;

	if (!slash || strcmp(slash, "/events") || (size_t)(slash - rest) >= sizeof(id))
		return reply_text(c, con, 404, "want /api/captures/ID/events\n");
	snprintf(id, sizeof(id), "%.*s", (int)(slash - rest), rest);
	if (caplog_events_path(c, id, path, sizeof(path)))
		return reply_text(c, con, 404, "no capture %s with events\n", id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return reply_text(c, con, 404, "no capture %s with events\n", id);
	if (fstat(fd, &st) || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return reply_text(c, con, 500, "%s: cannot read\n", path);
	}
	for (got = 0; got < st.st_size;) {
		ssize_t r = read(fd, buf + got, (size_t)(st.st_size - got));

		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	if (got != st.st_size) {
		free(buf);
		return reply_text(c, con, 500, "%s: cannot read\n", path);
	}
	return reply(con, 200, "application/x-ndjson", buf, (size_t)got);
}
