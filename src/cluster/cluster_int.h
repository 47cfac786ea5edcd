/* SPDX-License-Identifier: MIT */
/* Inside cluster queries (cluster.h): shared by cluster.c, cquery.c,
 * cquery_run.c and cquery_out.c. */
#ifndef FAY_CLUSTER_CLUSTER_INT_H
#define FAY_CLUSTER_CLUSTER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "common/bytes.h"
#include "common/wire_cluster.h"
#include "engine/engine.h"
#include "query/partial.h"

/* Emitted windows kept for late partials (amended rows). */
#define CQ_KEEP_WINDOWS	8
#define CQ_TICK_MS	50

/* One query connection. */
struct cpeer {
	struct cpeer *next;
	int fd;
	char host[WIRE_HOST_MAX + 1];
	char addr[64];
	bool collector;		/* a child collector */
	char kernel[65];	/* what it said it has (HELLO) */
	int btf;
	bool capture;		/* answers CAPTURE (HELLO "capture":true) */
	bool dead;		/* its thread is leaving: send nothing more */
	uint64_t last_beat;	/* monotonic ns */
	pthread_mutex_t send_lock;
};

enum cm_state { CM_ASKED, CM_ATTACHED, CM_FAILED, CM_ENDED, CM_GONE };

/* A member of a query: one host (or one child collector and its hosts). */
struct cmember {
	char host[WIRE_HOST_MAX + 1];
	struct cpeer *peer;	/* NULL once its connection is gone */
	enum cm_state state;
	char info[1024];	/* probes attached, or why it failed */
	bool final;		/* its last result arrived */
	unsigned nfinal;	/* final PARTIALs received (a child's may be amended) */
	unsigned nfinal_seen;	/* nfinal when the final result was last emitted */
	bool replied;		/* QSTATUS seen (since the last QUERY) */
	uint64_t attached_rt;	/* an agent: wall clock ns its QSTATUS attached
				 * came; 0 (a child collector: always) */
	struct ptable *snap;	/* latest cumulative snapshot (no window) */
	uint64_t snap_counters[ENGINE_NCOUNTERS];
	/* a child collector: the hosts under it, as its last PARTIAL named
	 * them (malloc'd) */
	struct wire_phost *subs;
	unsigned nsubs;
};

/* A tumbling window being merged, or emitted and kept for late rows. */
struct cwin {
	struct cwin *next;	/* by start, ascending */
	uint64_t start, end;	/* wall clock ns */
	struct ptable *t;
	struct ptable *late_t;	/* in a tree: rows that came after emission */
	struct ptable **ht;	/* host_answers: per member (ngot), its own rows */
	uint64_t counters[ENGINE_NCOUNTERS];
	unsigned char *got;	/* per member: 1 when it reported */
	size_t ngot;
	unsigned answered;	/* hosts (a child collector counts its own) */
	unsigned nreports;	/* members that reported it */
	unsigned late;
	bool emitted, amend;	/* amend: late rows merged since emission */
};

/* A streamed PARTIAL body waiting for the query thread. */
struct cchunk {
	struct cchunk *next;
	char host[WIRE_HOST_MAX + 1];
	unsigned char *body;
	size_t len;
};

struct cquery {
	struct cquery *next;
	struct cluster *cl;
	uint32_t qid;
	const char *text;
	size_t len;
	const struct plan *p;
	const char *scope_host;	/* host("x"): only x; NULL: every host */
	uint64_t start_rt, deadline_rt, window_ns, grace_ns;
	struct cmember *m;
	size_t nm, capm;
	struct cwin *wins;
	uint64_t next_wstart;	/* the next window the ticker opens */
	struct cchunk *chunks, **chunks_tail;
	uint64_t stream_counters[ENGINE_NCOUNTERS];	/* a stream's drops, summed */
	pthread_cond_t cond;
	bool has_collectors;	/* a member is a child collector */
	bool host_answers;	/* cluster_qopts.host_answers */
	bool flat, from_flat;	/* cluster_qopts.flat, .from_flat */
	bool shape_err_logged;
	char shape_err[512];	/* a member's partial of another shape */
};

struct ccap;

/* A collector beside this one (cluster_set_flat()), copied. */
struct cflat {
	char *name;
	char **hosts;
	size_t nhosts;
};

struct cluster {
	pthread_mutex_t lock;
	struct cpeer *peers;
	struct cquery *queries;
	struct ccap *captures;	/* captures waiting for their answers (ccapture.c) */
	uint32_t next_qid;
	uint32_t next_cid;
	struct cflat *flat;	/* the collectors beside this one */
	size_t nflat;
	int npeers_threads;	/* serving threads still running */
	pthread_cond_t peers_gone;
	volatile int stop;
};

/* A query's run: what the query thread emits (cquery_out.c). */
struct cq_run {
	struct cquery *q;
	const struct cluster_qopts *o;
	struct engine_out tout;		/* streams: the table header */
	struct wbuf lines;		/* root: NDJSON to emit, '\n' separated */
	struct wbuf frames;		/* tree: u8 type, le32 len, payload ... */
	bool status_sent, done;
	bool final_sent;		/* no window: the final result went out */
	unsigned late;			/* no window: hosts whose final came after it */
	unsigned nstatus;		/* statuses when the progress went */
	uint64_t next_snapshot, rows;
	struct engine_cats *cat_prev;	/* 'categorize': the last window's */
	char err[2048];			/* no host can run it: every reason */
};

/* Is member m expected to report the windows still to come? */
static inline bool cq_expected(const struct cmember *m)
{
	return m->peer && (m->state == CM_ATTACHED || m->state == CM_ASKED);
}

/* Did member m attach only after q's time ran out ('for')?  Its probes
 * then saw none of it: its answer, however final, holds nothing. */
static inline bool cq_attached_late(const struct cquery *q, const struct cmember *m)
{
	return q->deadline_rt && m->attached_rt >= q->deadline_rt;
}

/* Emit (into run->lines at the root, run->frames in a tree), under
 * cl->lock: a window (amended: again, with late rows), a snapshot or the
 * final result of a query without a window, the members' states, the
 * streamed records that arrived, and the end (tree: QSTATUS). */
void cq_emit_window(struct cq_run *run, struct cwin *w, bool amended);
void cq_emit_snapshot(struct cq_run *run, const struct ptable *t, uint64_t now,
		      const uint64_t counters[], const unsigned char *got, unsigned answered,
		      unsigned late, bool final, bool provisional, bool amended);
void cq_emit_progress(struct cq_run *run);
void cq_emit_rows(struct cq_run *run);
void cq_emit_end(struct cq_run *run);

/* Send QUERY for q to peer p (takes p's send lock).  0 or -errno. */
int cpeer_send_query(struct cpeer *p, const struct cquery *q);
/* Send CANCEL of qid to p. */
int cpeer_send_cancel(struct cpeer *p, uint32_t qid);

/* Under cl->lock: a peer connected: join every running query whose scope
 * names it (a restarted agent rejoins). */
void cquery_peer_joined(struct cluster *cl, struct cpeer *p);
/* Under cl->lock: p's connection is gone: its members become missing. */
void cquery_peer_left(struct cluster *cl, struct cpeer *p);
/* Under cl->lock: a QSTATUS / PARTIAL from p. */
void cquery_on_status(struct cluster *cl, struct cpeer *p, const struct wire_qstatus *s);
int cquery_on_partial(struct cluster *cl, struct cpeer *p, const struct wire_partial *wp,
		      char *why, size_t len);

/* ccapture.c, under cl->lock: a CAPTURED from p (its body copied;
 * frame_len: its bytes on the wire, header included); p's connection is
 * gone (its hosts of running captures: missing). */
void ccap_on_captured(struct cluster *cl, struct cpeer *p, const struct wire_captured *c,
		      size_t frame_len);
void ccap_peer_left(struct cluster *cl, struct cpeer *p);

/* Under cl->lock: the collector beside this one named name, or NULL. */
const struct cflat *cluster_flat_find(const struct cluster *cl, const char *name);

/* ---- cquery.c, for the query thread (cquery_run.c) ---- */

/* Is p within q's scope (every host, or the one host(...) names; a child
 * collector always is)? */
bool cq_in_scope(const struct cquery *q, const struct cpeer *p);
/* Under cl->lock: ask p to run q, as a new member or a member back after a
 * reconnect (its state, reason and snapshot start again).  0, or -ENOMEM,
 * or cpeer_send_query()'s error. */
int cq_ask(struct cquery *q, struct cpeer *p);
/* q's window starting at start (wall clock, ns); made (empty, ending at
 * start + the window or the deadline) and linked in order when create is
 * set.  NULL: none, or out of memory. */
struct cwin *cq_window_at(struct cquery *q, uint64_t start, bool create);
/* Free w (already unlinked) and its tables. */
void cq_window_free(struct cwin *w);

#endif
