// SPDX-License-Identifier: MIT
/*
 * What a cluster query emits (cluster_int.h: cq_emit_*), in one of two
 * forms:
 *
 *   at the root     NDJSON lines for POST /api/query: "window" lines with
 *                   the merged rows (ordered and limited here, final
 *                   values computed here), "hosts" completeness, drops
 *                   and, when asked, the "text" `fay query` prints;
 *                   "progress" and "row" lines;
 *   in a tree       (this collector runs --parent) frames for the upper
 *                   collector: each window's merged partial states as a
 *                   PARTIAL naming every host under this collector and
 *                   whether it answered, a late host's rows as a PARTIAL
 *                   of their own (merged by addition above: never counted
 *                   twice), and QSTATUS; order by, limit and final values
 *                   are left to the root.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "common/clock.h"
#include "common/json_str.h"
#include "common/log.h"
#include "query/query.h"

static const char *const state_name[] = {
	[CM_ASKED] = "asked", [CM_ATTACHED] = "attached", [CM_FAILED] = "failed",
	[CM_ENDED] = "ended", [CM_GONE] = "gone",
};

/* ---- output lines ------------------------------------------------------ */

static FILE *line_begin(struct cq_run *run, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);

	if (!f)
		run->lines.err = -ENOMEM;
	return f;
}

/* Close f (open_memstream sets *buf and *len then) and queue the line. */
static void line_end(struct cq_run *run, FILE *f, char **buf, size_t *len)
{
	if (fclose(f))
		run->lines.err = -ENOMEM;
	else {
		wbuf_put(&run->lines, *buf, *len);
		wbuf_u8(&run->lines, '\n');
	}
	free(*buf);
}

/* "text": the table or JSON lines of res, as `fay query` prints them. */
static void put_text(struct cq_run *run, FILE *f, const struct engine_result *res,
		     uint64_t wstart)
{
	struct engine_out o = { .json = run->o->text == CQ_JSON,
				.folded = run->o->text == CQ_FOLDED,
				.tree = run->o->text == CQ_TREE };
	char *buf = NULL;
	size_t len = 0;

	if (run->o->text == CQ_VALUES)
		return;
	o.f = open_memstream(&buf, &len);
	if (!o.f)
		return;
	engine_print_result(run->q->p, &o, res, wstart);
	fclose(o.f);
	fputs(",\"text\":", f);
	json_str(f, buf ? buf : "", len);
	free(buf);
}

static void put_counters(FILE *f, const uint64_t c[ENGINE_NCOUNTERS])
{
	fputs(",\"dropped\":{", f);
	for (int i = 0, k = 0; i < ENGINE_NCOUNTERS; i++) {
		const char *d = engine_counter_desc(i);

		if (!c[i])
			continue;
		if (k++)
			fputc(',', f);
		json_str(f, d, strlen(d));
		fprintf(f, ":%" PRIu64, c[i]);
	}
	fputc('}', f);
}

/* q's member named name, or NULL. */
static const struct cmember *member_named(const struct cquery *q, const char *name)
{
	for (size_t i = 0; i < q->nm; i++)
		if (!strcmp(q->m[i].host, name))
			return &q->m[i];
	return NULL;
}

/* The collectors beside this one that are not members of q (q->flat):
 * each missing with the hosts it last named (itself: it named none). */
static unsigned flat_absent(const struct cquery *q, FILE *f, int *k)
{
	const struct cluster *cl = q->cl;
	unsigned n = 0;

	for (size_t i = 0; q->flat && i < cl->nflat; i++) {
		const struct cflat *c = &cl->flat[i];

		if (member_named(q, c->name))
			continue;
		n += c->nhosts ? (unsigned)c->nhosts : 1;
		for (size_t h = 0; f && h < (c->nhosts ? c->nhosts : 1); h++) {
			const char *name = c->nhosts ? c->hosts[h] : c->name;

			if ((*k)++)
				fputc(',', f);
			json_str(f, name, strlen(name));
		}
	}
	return n;
}

/* The hosts member m stands for when it named none (a collector beside
 * this one before its first PARTIAL: those it last said it has), or
 * NULL: itself. */
static const struct cflat *unnamed_hosts(const struct cquery *q, const struct cmember *m)
{
	const struct cflat *c = q->flat && !m->nsubs ? cluster_flat_find(q->cl, m->host) : NULL;

	return c && c->nhosts ? c : NULL;
}

/* ,"hosts":{"asked":N,"answered":N,"late":N,"missing":[..],"failed":[..]} */
static void put_hosts(FILE *f, const struct cquery *q, const unsigned char *got,
		      unsigned answered, unsigned late)
{
	unsigned asked = flat_absent(q, NULL, NULL);
	int k = 0;

	for (size_t i = 0; i < q->nm; i++) {
		const struct cflat *c = unnamed_hosts(q, &q->m[i]);

		asked += q->m[i].nsubs ? q->m[i].nsubs : c ? (unsigned)c->nhosts : 1;
	}
	fprintf(f, ",\"hosts\":{\"asked\":%u,\"answered\":%u,\"late\":%u,\"missing\":[",
		asked, answered, late);
	for (size_t i = 0; i < q->nm; i++) {
		const struct cmember *m = &q->m[i];
		const struct cflat *c = unnamed_hosts(q, m);

		/* one that ended is not missing, unless its probes attached
		 * only after the query's time ran out (they saw nothing); a
		 * child collector that ended still names the hosts under it
		 * that did not answer */
		if (m->state == CM_FAILED ||
		    (m->state == CM_ENDED && !m->nsubs && !cq_attached_late(q, m)))
			continue;
		/* a child collector: the hosts under it it did not hear from */
		for (unsigned s = 0; s < m->nsubs; s++) {
			if (got[i] && m->subs[s].state == WIRE_HS_ANSWERED)
				continue;
			if (k++)
				fputc(',', f);
			json_str(f, m->subs[s].name, strlen(m->subs[s].name));
		}
		if (got[i] || m->nsubs)
			continue;
		for (size_t h = 0; h < (c ? c->nhosts : 1); h++) {
			const char *name = c ? c->hosts[h] : m->host;

			if (k++)
				fputc(',', f);
			json_str(f, name, strlen(name));
		}
	}
	flat_absent(q, f, &k);
	fputs("],\"failed\":[", f);
	k = 0;
	for (size_t i = 0; i < q->nm; i++) {
		if (q->m[i].state != CM_FAILED)
			continue;
		if (k++)
			fputc(',', f);
		json_str(f, q->m[i].host, strlen(q->m[i].host));
	}
	fputs("]}", f);
}

/* ,"attached_after_end":[..]: the members whose probes attached only
 * after q's time ran out; with always false, nothing when there are none. */
static void put_late(FILE *f, const struct cquery *q, bool always)
{
	int k = 0;

	for (size_t i = 0; i < q->nm; i++) {
		if (!cq_attached_late(q, &q->m[i]))
			continue;
		fputs(k++ ? "," : ",\"attached_after_end\":[", f);
		json_str(f, q->m[i].host, strlen(q->m[i].host));
	}
	if (k)
		fputc(']', f);
	else if (always)
		fputs(",\"attached_after_end\":[]", f);
}

/* The rows of t, categorized (cat), ordered and limited at this root. */
static int result_of(struct cq_run *run, const struct ptable *t, bool cat,
		     struct engine_result *res)
{
	const struct cquery *q = run->q;
	size_t n = ptable_count(t);

	memset(res, 0, sizeof(*res));
	res->rows = calloc(n ? n : 1, sizeof(*res->rows));
	if (!res->rows)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const void *k, *v;

		ptable_row(t, i, &k, &v);
		res->rows[i].key = malloc((size_t)q->p->key_size + 1);
		res->rows[i].val = malloc((size_t)q->p->value_size);
		res->nrows = i + 1;
		if (!res->rows[i].key || !res->rows[i].val)
			return -ENOMEM;
		memcpy(res->rows[i].key, k, (size_t)q->p->key_size);
		memcpy(res->rows[i].val, v, (size_t)q->p->value_size);
	}
	return (cat ? engine_result_categorize(q->p, res, &run->cat_prev) : 0) ? :
	       engine_result_order(q->p, res);
}

/* One "window" line: a tumbling window, a snapshot or the final result. */
static void line_result(struct cq_run *run, const struct ptable *t, uint64_t t_ns,
			uint64_t start, uint64_t end, const uint64_t counters[],
			const unsigned char *got, unsigned answered, unsigned late,
			bool final, bool provisional, bool amended)
{
	const struct cquery *q = run->q;
	struct engine_result res;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (result_of(run, t, true, &res)) {
		engine_result_clear(&res);
		run->lines.err = -ENOMEM;
		return;
	}
	f = line_begin(run, &buf, &len);
	if (!f) {
		engine_result_clear(&res);
		return;
	}
	fprintf(f, "{\"type\":\"window\",\"t\":%" PRIu64 ",\"start_ns\":%" PRIu64
		",\"end_ns\":%" PRIu64 ",\"rows\":[", t_ns / 1000000, start, end);
	for (size_t r = 0; r < res.nrows; r++) {
		if (r)
			fputc(',', f);
		engine_print_values(q->p, f, res.rows[r].key, res.rows[r].val);
	}
	fprintf(f, "],\"final\":%s,\"provisional\":%s,\"amended\":%s",
		final ? "true" : "false", provisional ? "true" : "false",
		amended ? "true" : "false");
	put_hosts(f, q, got, answered, late);
	put_counters(f, counters);
	if (final)
		put_late(f, q, false);
	if (res.cats) {
		fputc(',', f);
		engine_print_cats_json(res.cats, f);
	}
	put_text(run, f, &res, q->window_ns ? start : 0);
	fputc('}', f);
	line_end(run, f, &buf, &len);
	engine_result_clear(&res);
}

/* A "host_window" line: the rows host reported for window w. */
static void line_host(struct cq_run *run, const struct cwin *w, const char *host,
		      const struct ptable *t)
{
	const struct cquery *q = run->q;
	struct engine_result res;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (result_of(run, t, false, &res)) {
		engine_result_clear(&res);
		run->lines.err = -ENOMEM;
		return;
	}
	f = line_begin(run, &buf, &len);
	if (f) {
		fputs("{\"type\":\"host_window\",\"host\":", f);
		json_str(f, host, strlen(host));
		fprintf(f, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"rows\":[",
			w->start, w->end);
		for (size_t r = 0; r < res.nrows; r++) {
			if (r)
				fputc(',', f);
			engine_print_values(q->p, f, res.rows[r].key, res.rows[r].val);
		}
		fputs("]}", f);
		line_end(run, f, &buf, &len);
	}
	engine_result_clear(&res);
}

static void line_window(struct cq_run *run, struct cwin *w, bool amended)
{
	const struct cquery *q = run->q;
	bool provisional = false, last = q->deadline_rt && w->end >= q->deadline_rt;

	for (size_t i = 0; i < q->nm; i++)
		if (!w->got[i] && q->m[i].state != CM_FAILED && q->m[i].state != CM_ENDED)
			provisional = true;
	for (size_t i = 0; !amended && w->ht && i < q->nm && i < w->ngot; i++)
		if (w->ht[i])
			line_host(run, w, q->m[i].host, w->ht[i]);
	line_result(run, w->t, w->start, w->start, w->end, w->counters, w->got, w->answered,
		    w->late, last, provisional, amended);
	if (last && !amended)
		run->done = true;
}

static void line_progress(struct cq_run *run)
{
	const struct cquery *q = run->q;
	unsigned attached = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = line_begin(run, &buf, &len);

	if (!f)
		return;
	for (size_t i = 0; i < q->nm; i++)
		attached += q->m[i].state == CM_ATTACHED;
	fprintf(f, "{\"type\":\"progress\",\"attached\":%u,\"probes\":[", attached);
	for (size_t i = 0, k = 0; i < q->nm; i++) {
		char s[WIRE_HOST_MAX + 1100];

		if (q->m[i].state != CM_ATTACHED)
			continue;
		snprintf(s, sizeof(s), "%s: %s", q->m[i].host, q->m[i].info);
		if (k++)
			fputc(',', f);
		json_str(f, s, strlen(s));
	}
	fputs("],\"hosts\":[", f);
	for (size_t i = 0; i < q->nm; i++) {
		const struct cmember *m = &q->m[i];

		fprintf(f, "%s{\"host\":", i ? "," : "");
		json_str(f, m->host, strlen(m->host));
		fprintf(f, ",\"state\":\"%s\",\"info\":", m->replied || m->state == CM_GONE ?
			state_name[m->state] : "no answer yet");
		json_str(f, m->info, strlen(m->info));
		fputc('}', f);
	}
	fputs("]}", f);
	line_end(run, f, &buf, &len);
}

/* Streamed records that arrived: one "row" line each, until 'limit'. */
static void line_rows(struct cq_run *run)
{
	struct cquery *q = run->q;
	unsigned char *rec = malloc((size_t)q->p->record_size + 1);

	while (rec && q->chunks) {
		struct cchunk *c = q->chunks;
		struct rbuf r;
		uint64_t n;

		q->chunks = c->next;
		if (!q->chunks)
			q->chunks_tail = &q->chunks;
		rbuf_init(&r, c->body, c->len);
		n = rbuf_uvar_max(&r, c->len, "record count");
		for (uint64_t i = 0; i < n && !r.err; i++) {
			char *buf = NULL, *tbuf = NULL;
			size_t len = 0, tlen = 0;
			FILE *f;

			if (partial_record_decode(q->p, &r, rec))
				break;
			if (q->p->limit && run->rows >= q->p->limit) {
				run->done = true;
				break;
			}
			run->rows++;
			f = line_begin(run, &buf, &len);
			if (!f)
				break;
			fputs("{\"type\":\"row\",\"host\":", f);
			json_str(f, c->host, strlen(c->host));
			fputs(",\"values\":", f);
			engine_print_values(q->p, f, NULL, rec);
			if (run->o->text != CQ_VALUES) {
				run->tout.json = run->o->text == CQ_JSON;
				run->tout.f = open_memstream(&tbuf, &tlen);
				if (run->tout.f) {
					engine_print_record(q->p, &run->tout, rec);
					fclose(run->tout.f);
					fputs(",\"text\":", f);
					json_str(f, tbuf ? tbuf : "", tlen);
				}
				free(tbuf);
			}
			fputc('}', f);
			line_end(run, f, &buf, &len);
		}
		if (r.err)
			pr_warn("query %" PRIu32 ": records from %s: %s", q->qid, c->host, r.why);
		free(c->body);
		free(c);
		if (q->p->limit && run->rows >= q->p->limit)
			run->done = true;
	}
	free(rec);
}


/* The members a stream heard out, in got (q->nm of them): those whose
 * stream ended (every record of theirs came), or that still ran when
 * 'limit' ended the query (it needed no more); never one whose probes
 * attached only after the query's time ran out.  Returns the hosts they
 * stand for (a child collector: those it says answered). */
static unsigned stream_got(const struct cq_run *run, unsigned char *got)
{
	const struct cquery *q = run->q;
	bool limited = q->p->limit && run->rows >= q->p->limit;
	unsigned answered = 0;

	for (size_t i = 0; i < q->nm; i++) {
		const struct cmember *m = &q->m[i];

		got[i] = !cq_attached_late(q, m) &&
			 (m->final || (limited && m->peer && m->state == CM_ATTACHED));
		if (!got[i])
			continue;
		if (!m->nsubs)
			answered++;
		for (unsigned s = 0; s < m->nsubs; s++)
			answered += m->subs[s].state == WIRE_HS_ANSWERED;
	}
	return answered;
}

/* The line that ends a stream at the root: its completeness, as a
 * result's ("hosts", "provisional": a host missing, "dropped"), with
 * "limited" when 'limit' ended it and "attached_after_end" naming the
 * hosts whose probes attached only after its time ran out:
 * {"type":"stream_end","rows":N,"limited":B,"final":true,...,"hosts":{..},
 *  "dropped":{..},"attached_after_end":[..]} */
static void line_stream_end(struct cq_run *run)
{
	const struct cquery *q = run->q;
	unsigned char *got = calloc(q->nm + 1, 1);
	uint64_t now = clock_realtime_ns();
	bool provisional = false;
	unsigned answered;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!got) {
		run->lines.err = -ENOMEM;
		return;
	}
	answered = stream_got(run, got);
	for (size_t i = 0; i < q->nm; i++) {	/* a host missing (put_hosts' rule) */
		const struct cmember *m = &q->m[i];

		if (m->state == CM_FAILED)
			continue;
		if (!got[i] && (m->state != CM_ENDED || m->nsubs || cq_attached_late(q, m)))
			provisional = true;
		for (unsigned s = 0; got[i] && s < m->nsubs; s++)
			provisional |= m->subs[s].state != WIRE_HS_ANSWERED;
	}
	f = line_begin(run, &buf, &len);
	if (!f) {
		free(got);
		return;
	}
	fprintf(f, "{\"type\":\"stream_end\",\"t\":%" PRIu64 ",\"start_ns\":%" PRIu64
		",\"end_ns\":%" PRIu64 ",\"rows\":%" PRIu64 ",\"limited\":%s,\"final\":true,"
		"\"provisional\":%s,\"amended\":false", now / 1000000, q->start_rt, now, run->rows,
		q->p->limit && run->rows >= q->p->limit ? "true" : "false",
		provisional ? "true" : "false");
	put_hosts(f, q, got, answered, 0);
	put_counters(f, q->stream_counters);
	put_late(f, q, true);
	fputc('}', f);
	line_end(run, f, &buf, &len);
	free(got);
}

/* ---- up the tree -------------------------------------------------------- */

/* Queue one frame for the upper collector: u8 type, le32 length, payload. */
static void up_frame(struct cq_run *run, unsigned type, struct wbuf *w)
{
	if (w->err)
		run->frames.err = w->err;
	wbuf_u8(&run->frames, (uint8_t)type);
	wbuf_le32(&run->frames, (uint32_t)w->len);
	wbuf_put(&run->frames, w->p, w->len);
	wbuf_free(w);
}

/* The hosts under this collector for a PARTIAL: every member that runs
 * the query (a child collector: the hosts it named), answered or not. */
static void up_hosts(const struct cquery *q, const unsigned char *got, struct wire_partial *wp)
{
	unsigned n = 0;

	for (size_t i = 0; i < q->nm; i++)
		n += q->m[i].nsubs ? q->m[i].nsubs : 1;
	wp->hosts = calloc(n ? n : 1, sizeof(*wp->hosts));
	if (!wp->hosts)
		return;
	for (size_t i = 0; i < q->nm; i++) {
		const struct cmember *m = &q->m[i];

		if (m->state == CM_FAILED)
			continue;
		if (!m->nsubs) {
			snprintf(wp->hosts[wp->nhosts].name, sizeof(wp->hosts[0].name), "%s", m->host);
			wp->hosts[wp->nhosts++].state = got && got[i] ? WIRE_HS_ANSWERED :
							 WIRE_HS_MISSING;
			continue;
		}
		for (unsigned s = 0; s < m->nsubs; s++) {
			wp->hosts[wp->nhosts] = m->subs[s];
			if (!got || !got[i])
				wp->hosts[wp->nhosts].state = WIRE_HS_MISSING;
			wp->nhosts++;
		}
	}
}

static void up_partial(struct cq_run *run, unsigned flags, uint64_t start, uint64_t end,
		       const uint64_t counters[ENGINE_NCOUNTERS], const unsigned char *got,
		       const struct ptable *t)
{
	const struct cquery *q = run->q;
	struct wire_partial wp = {
		.qid = run->o->up->qid, .flags = flags, .start_ns = start, .end_ns = end,
		.ncounters = ENGINE_NCOUNTERS,
	};
	struct wbuf w = { 0 };

	for (int k = 0; k < ENGINE_NCOUNTERS; k++)
		wp.counters[k] = counters ? counters[k] : 0;
	up_hosts(q, got, &wp);
	wire_partial_encode_head(&wp, &w);
	free(wp.hosts);
	partial_shape_encode(q->p, &w);
	if (t)
		ptable_encode(t, &w);
	else
		wbuf_uvar(&w, 0);
	up_frame(run, WIRE_PARTIAL, &w);
}

static void up_status(struct cq_run *run, enum wire_qstate st, const char *text)
{
	struct wire_qstatus s = { .qid = run->o->up->qid, .state = st, .text = text,
				  .len = text ? strlen(text) : 0 };
	struct wbuf w = { 0 };

	wire_qstatus_encode(&s, &w);
	up_frame(run, WIRE_QSTATUS, &w);
}

/* ---- either form ---------------------------------------------------------- */

void cq_emit_window(struct cq_run *run, struct cwin *w, bool amended)
{
	const struct cquery *q = run->q;
	bool last = q->deadline_rt && w->end >= q->deadline_rt;

	if (run->o->up) {
		/* late rows go up on their own: added above, never twice */
		up_partial(run, WIRE_PF_WINDOW | (last && !amended ? WIRE_PF_FINAL : 0),
			   w->start, w->end, amended ? NULL : w->counters, w->got,
			   amended ? w->late_t : w->t);
		if (amended && w->late_t) {
			ptable_free(w->late_t);
			w->late_t = NULL;
		}
	} else {
		line_window(run, w, amended);
	}
	if (last && !amended)
		run->done = true;
}

void cq_emit_snapshot(struct cq_run *run, const struct ptable *t, uint64_t now,
		      const uint64_t counters[], const unsigned char *got, unsigned answered,
		      unsigned late, bool final, bool provisional, bool amended)
{
	const struct cquery *q = run->q;

	/* a parent keeps a child's latest snapshot: an amended final replaces it */
	if (run->o->up)
		up_partial(run, WIRE_PF_SNAPSHOT | (final ? WIRE_PF_FINAL : 0), q->start_rt, now,
			   counters, got, t);
	else
		line_result(run, t, now, q->start_rt, now, counters, got, answered, late, final,
			    provisional, amended);
}

void cq_emit_progress(struct cq_run *run)
{
	const struct cquery *q = run->q;
	char info[4096] = "";
	size_t n = 0;

	if (!run->o->up) {
		line_progress(run);
		return;
	}
	for (size_t i = 0; i < q->nm && n < sizeof(info); i++)
		if (q->m[i].state == CM_ATTACHED)
			n += (size_t)snprintf(info + n, sizeof(info) - n, "%s%s: %s", n ? "; " : "",
					      q->m[i].host, q->m[i].info);
	if (n)
		up_status(run, WIRE_QS_ATTACHED, info);
}

void cq_emit_rows(struct cq_run *run)
{
	struct cquery *q = run->q;

	if (!run->o->up) {
		line_rows(run);
		return;
	}
	while (q->chunks) {
		struct cchunk *c = q->chunks;
		struct wire_phost h = { .state = WIRE_HS_ANSWERED };
		struct wire_partial wp = {
			.qid = run->o->up->qid, .flags = WIRE_PF_STREAM, .nhosts = 1, .hosts = &h,
		};
		struct wbuf w = { 0 };

		q->chunks = c->next;
		if (!q->chunks)
			q->chunks_tail = &q->chunks;
		snprintf(h.name, sizeof(h.name), "%s", c->host);
		wp.start_ns = wp.end_ns = clock_realtime_ns();
		wire_partial_encode_head(&wp, &w);
		partial_shape_encode(q->p, &w);
		wbuf_put(&w, c->body, c->len);
		up_frame(run, WIRE_PARTIAL, &w);
		free(c->body);
		free(c);
	}
}

void cq_emit_end(struct cq_run *run)
{
	const struct cquery *q = run->q;
	uint64_t now = clock_realtime_ns();
	unsigned char *got;

	if (!run->o->up) {
		/* a stream says who it heard: never an end without a word */
		if (!run->err[0] && q->p->mode == PLAN_STREAM)
			line_stream_end(run);
		return;
	}
	if (run->err[0]) {
		up_status(run, WIRE_QS_FAILED, run->err);
		return;
	}
	if (q->p->mode == PLAN_STREAM) {
		/* the hosts under this collector it heard out, and their drops */
		got = calloc(q->nm + 1, 1);
		if (got)
			stream_got(run, got);
		/* one time for both ends: two calls (arguments are evaluated
		 * in no set order; here the end's came first) gave an end
		 * before the start, a violation: the parent closed this link,
		 * every query on it lost, at the end of each stream */
		up_partial(run, WIRE_PF_STREAM | WIRE_PF_FINAL, now, now, q->stream_counters, got,
			   NULL);
		free(got);
	}
	up_status(run, WIRE_QS_ENDED, "");
}
