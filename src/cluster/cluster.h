/* SPDX-License-Identifier: MIT */
/*
 * Cluster queries, on the collector: the registry of query connections
 * (agents, and child collectors of an aggregation tree), fan-out of a
 * query to the hosts that can run it, merge of their per-window partial
 * aggregates as they arrive, and the completeness of every window.
 *
 *   cluster.c   peers: serve a query connection (HELLO role "query"),
 *               BEAT liveness, QSTATUS and PARTIAL into the queries
 *   cquery.c    one query: members, windows, grace, emission as NDJSON
 *               lines (the same lines as POST /api/query on one host,
 *               plus each window's "hosts" completeness); its thread and
 *               run in cquery_run.c, its output in cquery_out.c
 *   ctree.c     --parent: this collector as a member of its parent's
 *               queries (its merged windows go up as PARTIALs)
 *
 * Locking: one mutex (cluster->lock) guards the peers, the queries and
 * every query's state; a peer's socket has its own send lock, taken
 * without cluster->lock held... or with it: never the reverse order.
 */
#ifndef FAY_CLUSTER_CLUSTER_H
#define FAY_CLUSTER_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/qengine.h"
#include "common/qlink.h"
#include "query/plan.h"
#include "query/query.h"

struct cluster;

#define CLUSTER_GRACE_NS	1000000000ull	/* default --grace */

struct cluster *cluster_new(void);
/* Cancel every query, close every connection, wait for their threads. */
void cluster_free(struct cluster *cl);

/* What a query connection's HELLO said. */
struct cluster_peer_info {
	const char *host;	/* the host's name */
	bool collector;		/* a child collector (its PARTIALs name its hosts) */
	const char *kernel;	/* uname release, "" if not said */
	int btf;		/* kernel BTF: 1, 0, -1 not said */
	bool capture;		/* answers CAPTURE frames (the flight recorder) */
};

/*
 * Serve a query connection whose HELLO (role "query") was accepted: the
 * calling thread reads its frames until it closes, dies (no BEAT for
 * WIRE_DEAD_MS) or the cluster is freed; the caller closes fd.
 */
void cluster_serve(struct cluster *cl, int fd, const char *peer_addr,
		   const struct cluster_peer_info *info);

/* Connected query peers, as a JSON array text
 * [{"host":..,"peer":..,"collector":B,"kernel":..,"btf":B|null,
 * "queries":[{"qid":N,"query":..,"state":..,"probes":..}]}]; malloc'd,
 * NULL on ENOMEM. */
char *cluster_peers_json(struct cluster *cl);

struct cluster_qopts {
	uint64_t grace_ns;	/* 0: CLUSTER_GRACE_NS */
	enum { CQ_VALUES, CQ_TABLE, CQ_JSON, CQ_FOLDED, CQ_TREE } text;	/* "text" of each line */
	bool all;		/* a source without a scope runs as cluster.X */
	/* each window is preceded by one "host_window" line per host that
	 * reported it, with that host's own rows (its finalized partial
	 * answer, ordered, not categorized): {"type":"host_window",
	 * "host":H,"start_ns","end_ns","rows":[..]} (standing queries) */
	bool host_answers;
	/* In a tree (ctree.c): the upper collector's query; windows go up
	 * as PARTIALs through it instead of lines through env->emit. */
	struct qlink_job *up;
	/* Count the collectors beside this one (cluster_set_flat()) as
	 * asked: one that is not a member (not linked here) is missing with
	 * the hosts it last named, never left out (standing queries). */
	bool flat;
	/* The query came from a collector beside this one (ctree_start()
	 * with flat): ask none of them, so two that both think the other
	 * holds the lease never pass a query round. */
	bool from_flat;
};

/* A collector beside this one on a shared store (standing.c reads them
 * from the store): it links to the lease's holder as a child collector
 * would, its HELLO host being its name. */
struct cluster_flat {
	const char *name;		/* its HELLO host: its --advertise address */
	const char *const *hosts;	/* its agents' hosts, as it last said */
	size_t nhosts;
};

/* Replace the list of collectors beside this one (copied; n 0: none).
 * 0, or -ENOMEM (the old list kept). */
int cluster_set_flat(struct cluster *cl, const struct cluster_flat *v, size_t n);

/*
 * Run query q (planned with query_opts.cluster; text is its source) on
 * the hosts its scope names, until its end or *env->stop, emitting lines
 * through env->emit.  Returns 0, or -errno with a message in err (no host
 * can run it: each host's reason).  The caller has decided that the query's
 * requester may load probes on every host (#20: POST /api/query and
 * standing queries ask for it, collector/requester.h; a parent collector's QUERY
 * carried WIRE_QF_PROBE): each QUERY frame says so.
 */
int cluster_query_run(struct cluster *cl, struct query *q, const struct plan *p,
		      const char *text, const struct cluster_qopts *o,
		      const struct qengine_env *env, char *err, size_t errlen);

/* ---- ccapture.c: the flight recorder (#22) ------------------------------ */

/* What a capture asks every agent for (wire_cluster.h CAPTURE). */
struct cluster_capture_req {
	enum wire_ckind kind;
	uint64_t trace_hi, trace_lo;	/* WIRE_CK_TRACE */
	uint64_t from_ns, to_ns;	/* WIRE_CK_WINDOW (wall clock) */
	const char *service;		/* WIRE_CK_WINDOW: NULL or "": any */
	const char *host;		/* only this host: its agent, or the child
					 * collectors, asked for it under them;
					 * NULL: every one */
	uint64_t timeout_ns;		/* how long to wait for the answers */
};

enum cluster_capture_state {
	CCH_ANSWERED,		/* its spans are in spans (maybe none) */
	CCH_OFF,		/* answered: the agent keeps no flight buffer */
	CCH_MISSING,		/* asked, no answer in time, or its connection
				 * went away */
	CCH_UNSUPPORTED,	/* a peer that does not answer CAPTURE (a child
				 * collector, an agent before #22): not asked */
	CCH_NOHOST,		/* a child collector asked for rq->host, which
				 * is not under it: not a member after all */
};

/* A child collector's missing hosts under it: none answered is
 * CCH_MISSING; some is CCH_ANSWERED with partial set. */

struct cluster_capture_host {
	char host[WIRE_HOST_MAX + 1];
	char via[WIRE_HOST_MAX + 1];	/* "" or the child collector asked for
					 * host (rq->host) under it */
	enum cluster_capture_state state;
	bool cut;			/* it had more than one frame holds */
	bool partial;			/* a child collector: some hosts under
					 * it did not answer */
	uint32_t nspans;
	uint64_t held, dropped, oldest_ns;	/* its flight buffer (wire_captured) */
	uint64_t lost;			/* spans of the trace already overwritten */
	unsigned char *spans;		/* a BATCH payload, malloc'd (ANSWERED) */
	size_t len;
	uint64_t wire_bytes;		/* its CAPTURE and CAPTURED frames,
					 * headers included */
};

struct cluster_capture_res {
	struct cluster_capture_host *h;
	size_t n;
};

/*
 * Ask every connected query peer (rq->host: the one of that name, and
 * every child collector for it, the host being maybe under one) for
 * the spans rq names in its flight buffer, and wait until each answered,
 * went away, or rq->timeout_ns passed.  Fills res (free it with
 * cluster_capture_res_free(), also after a failure).  0, or -ENOMEM.
 */
int cluster_capture_run(struct cluster *cl, const struct cluster_capture_req *rq,
			struct cluster_capture_res *res);
void cluster_capture_res_free(struct cluster_capture_res *res);

/* ---- ctree.c: this collector under a parent (--parent) ---------------- */

struct ctree;

/* Keep a query connection to the parent collector at parent (HOST:PORT
 * of its agent port) and run its queries on cl (this collector's agents).
 * NULL with errno (EINVAL: a bad address).  The strings must outlive it.
 * tls: TLS to the parent (--parent-tls-ca; NULL: plaintext), must outlive it
 * too.  flat: the "parent" is the collector beside this one that holds a
 * shared store's lease (standing.c): its queries ask no collector beside
 * this one (cluster_qopts.from_flat). */
struct tls_conf;
struct ctree *ctree_start(struct cluster *cl, const char *parent, const char *host,
			  const char *token, struct tls_conf *tls, bool flat);
/* Stop the parent's queries, close, join.  Accepts NULL. */
void ctree_stop(struct ctree *t);

#endif
