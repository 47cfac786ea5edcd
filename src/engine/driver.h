/* SPDX-License-Identifier: MIT */
/*
 * The one query driver: load, attach, then wait for records, window ends,
 * snapshots, the time limit, a watched fd or a stop flag, and hand what
 * the engine yields to a sink.  `fay query` (src/cli), POST /api/query
 * (src/engine/qrun.c) and the agent's cluster runner (src/agent) are
 * three sinks of this one loop.
 *
 *	struct engine_sink s = { .sz = sizeof(s), .result = my_rows, .ctx = me };
 *	struct engine_drive_opts o = { .sz = sizeof(o), .stop = &flag };
 *	rc = engine_drive(q, plan, &o, &s);
 *
 * Time.  Windows are tumbling: with o->align, they end on wall-clock
 * multiples of the window length (the first one is shorter), so hosts
 * that run the same query report the same windows; without, the first
 * window starts at attach.  An aggregate query with no window gets a
 * cumulative snapshot every o->snapshot_ns (0: none) and a final result
 * at the end.  The end is the query's 'for', o->deadline_realtime_ns,
 * 'limit N' rows of a stream, *o->stop, o->watch_fd readable (a pidfd),
 * or a sink returning non-zero.
 *
 * Nothing here prints or touches signal dispositions: a CLI blocks its
 * signals and passes the mask to let them in during the wait
 * (o->wait_mask, ppoll), so a signal can never fall between the check of
 * *o->stop and the sleep.
 */
#ifndef FAY_ENGINE_DRIVER_H
#define FAY_ENGINE_DRIVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/* What a result covers. */
struct engine_window {
	uint64_t start_ns, end_ns;	/* wall clock; end_ns is when it was read */
	bool windowed;			/* a tumbling window ('window DUR') */
	bool snapshot;			/* cumulative so far, more will come */
	bool final;			/* the last result of the query */
};

/*
 * The outputs of the driver.  Every callback is optional; a non-zero
 * return stops the query (the driver returns it).  e is the running
 * engine (engine_plan(e), engine_probe_desc(e, i) ...).
 */
struct engine_sink {
	size_t sz;			/* sizeof(struct engine_sink) */
	/* Every probe attached; the query runs from now on. */
	int (*attached)(void *ctx, struct engine *e);
	/* One streamed record (record_size bytes). */
	int (*record)(void *ctx, struct engine *e, const void *rec, size_t size);
	/* Aggregated rows of a window, a snapshot or the end; res->counters
	 * are the drop counters of the same span of time (windows) or since
	 * the start.  res is freed by the driver after the call. */
	int (*result)(void *ctx, struct engine *e, const struct engine_result *res,
		      const struct engine_window *w);
	/* The records waiting were delivered (flush output here). */
	int (*batch_end)(void *ctx, struct engine *e);
	/* A stream ended: its drop counters since the start. */
	int (*stream_end)(void *ctx, struct engine *e,
			  const uint64_t counters[ENGINE_NCOUNTERS]);
	void *ctx;
	/* A line to tell the user while the query runs (fay run following
	 * the command's execs: an image not traced, and why); NULL: none. */
	void (*note)(void *ctx, struct engine *e, const char *line);
};
#define engine_sink__last_field note

struct engine_drive_opts {
	size_t sz;			/* sizeof(struct engine_drive_opts) */
	struct engine_opts eo;		/* pid, no_fentry, buffer (sz filled in) */
	const volatile sig_atomic_t *stop;	/* non-zero: stop (NULL: never) */
	const sigset_t *wait_mask;	/* signals let in during the wait */
	int watch_fd;			/* > 0: stop when readable (pidfd); 0 or -1: none */
	uint64_t snapshot_ns;		/* aggregates without a window: snapshot period */
	bool align;			/* windows on wall-clock boundaries */
	bool raw;			/* rows neither ordered nor limited (partials) */
	uint64_t deadline_realtime_ns;	/* > 0: stop then (and at 'for') */
	unsigned tick_ms;		/* longest wait between checks of *stop (0: none) */
	char *err;			/* a message for a failure (NULL: none kept) */
	size_t errlen;
	/* spans(...) plans (engine.h, engine_span_feed()): who feeds them
	 * (fay agent).  spans_attach is called once the engine takes
	 * feeds, spans_detach before the engine is freed (no feed may run
	 * once it returns).  Without spans_attach such a plan is refused
	 * with -EOPNOTSUPP and o->err says how to run it. */
	int (*spans_attach)(void *ctx, struct engine *e);
	void (*spans_detach)(void *ctx, struct engine *e);
	void *spans_ctx;
};
#define engine_drive_opts__last_field spans_ctx

/* How engine_drive() ended. */
enum engine_drive_rc {
	ENGINE_DRIVE_OK = 0,
	ENGINE_DRIVE_QUERY = 2,		/* an error in the query (query_error(q)) */
};

/*
 * Run plan p of query q until its end (see above).  Returns 0; 2 when
 * the query itself is wrong (query_error(q) at its line:col); -errno for
 * a runtime failure (privileges, probes, reading maps; a verifier
 * rejection too, then query_error(q) also points at the line:col) with
 * the engine's message in o->err; or the non-zero value a sink returned.  Every path out detaches and frees the engine.
 */
int engine_drive(struct query *q, const struct plan *p,
		 const struct engine_drive_opts *o, const struct engine_sink *s);

/*
 * Compile text (len bytes; source names it in messages) into a plan:
 * parse, check, plan.  Returns the query (free with query_free(); *p is
 * valid until then), or NULL with the reason in err (the formatted
 * line:col error of the query, or "out of memory").
 */
struct query *engine_plan_text(const char *source, const char *text, size_t len,
			       const struct query_opts *qo, const struct plan **p,
			       char *err, size_t errlen);

/* The wall-clock end of the window holding now_ns, for windows of w ns
 * aligned on multiples of w (w > 0). */
uint64_t engine_window_end(uint64_t now_ns, uint64_t w);

#endif
