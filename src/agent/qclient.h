/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of cluster queries (common/wire_cluster.h): a query
 * connection to the collector, kept up with backoff, over which the
 * collector sends QUERY and CANCEL and the agent answers QSTATUS, PARTIAL
 * (one per window, the host's merge of the per-CPU partials) and a BEAT
 * every second.
 *
 * Each query runs in a thread of its own through the query driver
 * (engine/driver.h, the same loop and code generation as `fay query`),
 * with windows aligned to the wall clock and rows left raw for the
 * collector to merge.  When the connection is lost every query is
 * stopped and its probes detached (the collector sends what is still
 * running again once the agent is back).
 */
#ifndef FAY_AGENT_QCLIENT_H
#define FAY_AGENT_QCLIENT_H

#include <stdbool.h>

struct spantap;
struct flight;
struct keepreg;
struct tls_conf;

struct qclient_opts {
	const char *collector;	/* host:port of the collector's agent port */
	const char *host;	/* this host's name (HELLO, the host field) */
	const char *agent_id;	/* 32 hex digits */
	const char *token;	/* NULL: none */
	struct tls_conf *tls;	/* NULL: plaintext */
	const char *tracefs;	/* NULL: find it (tests) */
	/* spans(...) queries attach here (NULL: they fail, saying so) */
	struct spantap *tap;
	/* a non-root agent's cluster queries probe every user's processes
	 * (the requester is the agent's user: engine_opts_requester()) */
	bool allow_other_users;
	/* function(...) in a running process without fay's runtime: load it
	 * (engine_opts.inject_lib, .no_inject) */
	const char *inject_lib;
	bool no_inject;
	/* the flight buffer CAPTUREs read (NULL: answered "off") */
	struct flight *flight;
	/* where queries in keep mode register their buffers (NULL: such a
	 * query fails, saying so) */
	struct keepreg *keeps;
	/* only tasks in this cgroup (engine_opts.cgroup); NULL: all */
	const char *cgroup;
	/* libfay's shm files (engine_opts.shm_dir) */
	const char *shm_dir;
};

/* A query link (common/qlink.h) that runs what it is sent here. */
struct qclient;

/* Start the connection thread.  NULL and errno on failure (a bad
 * address: EINVAL).  o is copied; its strings must outlive the client
 * (tracefs is kept as a pointer). */
struct qclient *qclient_start(const struct qclient_opts *o);
/* Stop every query (probes detached), close, join.  Accepts NULL. */
void qclient_stop(struct qclient *c);
/* The token of its next HELLO (qlink_set_token()). */
void qclient_set_token(struct qclient *c, const char *token);

#endif
