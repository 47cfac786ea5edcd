// SPDX-License-Identifier: MIT
/*
 * The one query driver (driver.h): load, attach, and a loop that waits
 * with ppoll() for the stream's fd, new processes (engine_exec_fd()), a
 * watched fd, new libfay files (engine_spancur_fd()) and the next deadline (window end, snapshot, time limit,
 * tick), then hands records and
 * aggregates to the sink.  Every path out frees the engine, which
 * detaches every probe.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "engine/driver.h"
#include "engine/engine_int.h"

struct drv {
	struct query *q;
	const struct engine_drive_opts *o;
	const struct engine_sink *s;
	const struct plan *p;
	struct engine *e;
	uint64_t rows;		/* streamed rows delivered ('limit N') */
	int sink_rc;		/* the first non-zero return of a sink */
	bool fed;		/* spans_attach() was called */
};

struct query *engine_plan_text(const char *source, const char *text, size_t len,
			       const struct query_opts *qo, const struct plan **p,
			       char *err, size_t errlen)
{
	struct query *q = query_new(source, text, len, qo);

	if (!q) {
		snprintf(err, errlen, "%s", errno == E2BIG ? "the query is larger than 1 MiB" :
			 "out of memory");
		return NULL;
	}
	if (query_plan(q, p)) {
		snprintf(err, errlen, "%s", query_error(q) ? query_error(q) : "out of memory");
		query_free(q);
		return NULL;
	}
	return q;
}

uint64_t engine_window_end(uint64_t now_ns, uint64_t w)
{
	return (now_ns / w + 1) * w;
}

/* Keep a message (prefix + m, trailing newlines dropped) for the caller. */
static void keep_err(const struct engine_drive_opts *o, const char *prefix, const char *m)
{
	size_t n;

	if (!o->err || !o->errlen)
		return;
	snprintf(o->err, o->errlen, "%s%s", prefix, m);
	n = strlen(o->err);
	while (n && o->err[n - 1] == '\n')
		o->err[--n] = '\0';
}

static void on_record(void *ctx, const void *rec, size_t size)
{
	struct drv *d = ctx;
	int rc;

	if (d->sink_rc || (d->p->limit && d->rows >= d->p->limit))
		return;
	d->rows++;
	rc = d->s->record(d->s->ctx, d->e, rec, size);
	if (rc && !d->sink_rc)
		d->sink_rc = rc;
}

/* Read the aggregates (reset at a window's end) and give them to the sink. */
static int deliver(struct drv *d, bool reset, const struct engine_window *w)
{
	struct engine_result res;
	int err;

	if (!d->s->result)
		return 0;
	err = engine_read_rows(d->e, reset, d->o->raw, &res);
	if (err) {
		keep_err(d->o, "", engine_error(d->e));
		return err;
	}
	err = d->s->result(d->s->ctx, d->e, &res, w);
	engine_result_clear(&res);
	return err;
}

static int wait_events(struct drv *d, uint64_t now, uint64_t wake)
{
	const struct engine_drive_opts *o = d->o;
	struct pollfd pf[5];
	struct timespec ts, *tsp = NULL;
	int npf = 0, sfd = engine_stream_fd(d->e), xfd = engine_exec_fd(d->e), xi = -1;
	int cfd = engine_spancur_fd(d->e), wi = -1, ifd = engine_inl_fd(d->e), ii = -1;

	if (o->tick_ms && (wake == UINT64_MAX || wake - now > o->tick_ms * 1000000ull))
		wake = now + o->tick_ms * 1000000ull;
	/* an exec()ed image held until fay arms it */
	if (engine_inl_following(d->e) &&
	    (wake == UINT64_MAX || wake - now > ENGINE_INL_FOLLOW_MS * 1000000ull))
		wake = now + ENGINE_INL_FOLLOW_MS * 1000000ull;
	if (wake != UINT64_MAX) {
		uint64_t dt = wake > now ? wake - now : 0;

		ts.tv_sec = (time_t)(dt / 1000000000ull);
		ts.tv_nsec = (long)(dt % 1000000000ull);
		tsp = &ts;
	}
	if (sfd >= 0) {
		pf[npf].fd = sfd;
		pf[npf++].events = POLLIN;
	}
	if (xfd >= 0) {
		xi = npf;
		pf[npf].fd = xfd;
		pf[npf++].events = POLLIN;
	}
	if (o->watch_fd > 0) {
		wi = npf;
		pf[npf].fd = o->watch_fd;
		pf[npf++].events = POLLIN;
	}
	if (cfd >= 0) {		/* a new libfay file: engine_spancur_tick() */
		pf[npf].fd = cfd;
		pf[npf++].events = POLLIN;
	}
	if (ifd >= 0) {		/* the inline session's exec or exit */
		ii = npf;
		pf[npf].fd = ifd;
		pf[npf++].events = POLLIN;
	}
	if (ppoll(pf, (nfds_t)npf, tsp, o->wait_mask) < 0) {
		int err = errno;

		if (err == EINTR)
			return 0;
		keep_err(o, "waiting: ", strerror(err));
		return -err;
	}
	if (sfd >= 0 && (pf[0].revents & POLLIN)) {
		engine_consume(d->e);
		if (d->s->batch_end && !d->sink_rc)
			d->sink_rc = d->s->batch_end(d->s->ctx, d->e);
	}
	if (xi >= 0 && (pf[xi].revents & POLLIN))
		engine_exec_consume(d->e);
	if (ii >= 0 && (pf[ii].revents & (POLLIN | POLLHUP | POLLERR)))
		engine_inl_hangup(d->e);
	if (engine_inl_follow(d->e) && d->s->note)
		d->s->note(d->s->ctx, d->e, engine_note(d->e));
	if (wi >= 0 && (pf[wi].revents & (POLLIN | POLLHUP)))
		return 1;	/* the watched process exited */
	return 0;
}

/*
 * Auto mode, the runtime refused to arm an inline probe (after SITES
 * took it: no room for a trampoline, a thread that could not be moved
 * out of the patched bytes): the query again, as a uprobe, the runtime's
 * session (which holds a program fay run started) kept open until that
 * uprobe is attached.  0, or -errno (err when it was not that; d->e
 * NULL when the query could not be built again, its message kept).
 */
static int as_uprobe(struct drv *d, int err)
{
	struct engine_opts eo = d->o->eo;
	char note[1024];
	int hold = engine_inl_fallback(d->e, note, sizeof(note));

	if (hold < 0)
		return err;
	engine_free(d->e);
	eo.sz = sizeof(eo);
	eo.probe_mode = ENGINE_PROBE_UPROBE;
	d->e = engine_new(d->q, d->p, &eo, d->o->err, d->o->errlen);
	if (!d->e) {
		err = errno ? -errno : -EINVAL;
		close(hold);
		return err;
	}
	engine_inl_adopt(d->e, hold, note);
	if (d->p->mode == PLAN_STREAM && d->s->record)
		engine_set_record_fn(d->e, on_record, d);
	err = engine_load(d->e);
	return err ? : engine_attach(d->e);
}

static int start(struct drv *d)
{
	int err;

	if (d->p->mode == PLAN_STREAM && d->s->record)
		engine_set_record_fn(d->e, on_record, d);
	err = engine_load(d->e);
	err = err ? : engine_attach(d->e);
	if (err)
		err = as_uprobe(d, err);
	if (err && !d->e)
		return err;
	if (err) {
		keep_err(d->o, "", engine_error(d->e));
		return err;
	}
	if (d->p->entry.kind == PA_SPANS) {
		err = d->o->spans_attach(d->o->spans_ctx, d->e);
		if (err) {
			keep_err(d->o, "cannot take spans from this agent: ",
				 err == -ENOSPC ? "too many spans(...) queries run here" :
				 strerror(-err));
			return err;
		}
		d->fed = true;
	}
	return d->s->attached ? d->s->attached(d->s->ctx, d->e) : 0;
}

int engine_drive(struct query *q, const struct plan *p,
		 const struct engine_drive_opts *o, const struct engine_sink *s)
{
	struct engine_opts eo = o->eo;
	struct drv d = { .q = q, .o = o, .s = s, .p = p };
	bool stream = p->mode == PLAN_STREAM, windowed = p->window_ns && !stream;
	uint64_t t0, rt0, deadline = 0, wnext = 0, snext = 0, wstart = 0;
	bool ustacks;
	int rc;

	if (o->err && o->errlen)
		o->err[0] = '\0';
	if (p->entry.kind == PA_SPANS && !o->spans_attach) {
		keep_err(o, "", "spans(...) queries run in fay agent, over the spans it drains from "
			 "libfay's rings: start fay collector and fay agent --collector HOST:PORT, then "
			 "fay query --cluster URL 'from sp in cluster.spans(\"SERVICE\") ...' "
			 "(host(\"NAME\").spans(...) for one host)");
		return -EOPNOTSUPP;
	}
	eo.sz = sizeof(eo);
	d.e = engine_new(q, p, &eo, o->err, o->errlen);
	if (!d.e) {
		rc = errno ? -errno : -EINVAL;
		if (query_error(q))
			return ENGINE_DRIVE_QUERY;
		if (o->err && o->errlen) {	/* engine_new() wrote it */
			size_t n = strlen(o->err);

			while (n && o->err[n - 1] == '\n')
				o->err[--n] = '\0';
		}
		return rc;
	}
	rc = start(&d);
	if (rc)
		goto out;

	ustacks = engine_stacks_tick(d.e);
	ustacks |= engine_spancur_tick(d.e);
	t0 = clock_monotonic_ns();
	rt0 = clock_realtime_ns();
	if (p->for_ns)
		deadline = t0 + p->for_ns;
	if (o->deadline_realtime_ns) {
		uint64_t dl = t0 + (o->deadline_realtime_ns > rt0 ?
				    o->deadline_realtime_ns - rt0 : 0);

		if (!deadline || dl < deadline)
			deadline = dl;
	}
	if (windowed) {
		if (o->align) {
			uint64_t wend = engine_window_end(rt0, p->window_ns);

			wnext = t0 + (wend - rt0);
			wstart = wend - p->window_ns;
		} else {
			wnext = t0 + p->window_ns;
			wstart = rt0;
		}
	} else if (!stream && o->snapshot_ns) {
		snext = t0 + o->snapshot_ns;
	}

	for (;;) {
		uint64_t now = clock_monotonic_ns(), wake = UINT64_MAX;

		if ((o->stop && *o->stop) || d.sink_rc)
			break;
		if (deadline && now >= deadline)
			break;
		if (wnext && now >= wnext) {
			uint64_t rt = clock_realtime_ns();
			struct engine_window w = {
				.start_ns = wstart, .end_ns = rt, .windowed = true,
			};

			if (o->align)
				w.end_ns = wstart + p->window_ns;
			wstart = o->align ? wstart + p->window_ns : rt;
			wnext += p->window_ns;
			rc = deliver(&d, true, &w);
			if (rc)
				goto out;
			continue;
		}
		if (snext && now >= snext) {
			struct engine_window w = {
				.start_ns = rt0, .end_ns = clock_realtime_ns(), .snapshot = true,
			};

			snext += o->snapshot_ns;
			rc = deliver(&d, false, &w);
			if (rc)
				goto out;
			continue;
		}
		if (deadline)
			wake = deadline;
		if (wnext && wnext < wake)
			wake = wnext;
		if (snext && snext < wake)
			wake = snext;
		if (ustacks && now + ENGINE_STACK_TICK_MS * 1000000ull < wake)
			wake = now + ENGINE_STACK_TICK_MS * 1000000ull;
		if (ustacks && engine_spancur_wake(d.e) < wake)
			wake = engine_spancur_wake(d.e);
		rc = wait_events(&d, now, wake);
		if (ustacks) {
			engine_stacks_tick(d.e);
			engine_spancur_tick(d.e);
		}
		if (rc < 0)
			goto out;
		if (rc > 0)
			break;
		if (stream && p->limit && d.rows >= p->limit)
			break;
	}
	rc = d.sink_rc;
	if (rc)
		goto out;
	/* the end: what is left.  Inline probes are detached first (they
	 * write the maps in nanoseconds: a read while they run could see a
	 * value half updated); kernel probes after the read (engine_free):
	 * closing a uprobe takes ~0.1 s here, and a cluster agent's final
	 * partial must reach the collector within its 1 s grace */
	if (engine_runs_inline(d.e))
		engine_detach(d.e);
	if (stream) {
		uint64_t c[ENGINE_NCOUNTERS];

		engine_consume(d.e);
		rc = d.sink_rc;
		if (!rc && s->stream_end && !engine_counters(d.e, c))
			rc = s->stream_end(s->ctx, d.e, c);
	} else {
		struct engine_window w = {
			.start_ns = windowed ? wstart : rt0, .end_ns = clock_realtime_ns(),
			.windowed = windowed, .final = true,
		};

		rc = deliver(&d, windowed, &w);
	}
out:
	if (d.fed)
		o->spans_detach(o->spans_ctx, d.e);
	engine_free(d.e);
	return rc;
}
