/* SPDX-License-Identifier: MIT */
/*
 * Who may load probes through the collector (#20): decided for every
 * request that would (POST /api/query, POST and DELETE /api/queries).
 *
 * With tokens (--token-file, --token), the token's probe scope decides
 * (http_screen.c has checked it): its holder may probe everything the
 * collector may.  Without tokens the collector listens on loopback only,
 * and the requester is the user who owns the client's socket (its uid,
 * from the kernel's socket tables: common/peer.h), the same rule as a
 * local `fay query`:
 *
 *   - root, the collector's own user, a member of --probe-group, or a
 *     client presenting the collector's probe token (PATH.probe-token,
 *     made at each start, readable by the collector's user alone: the
 *     UI's Live query in a browser of another user, /#token=T) may probe
 *     everything the collector may (COLL_PROBE_ALL);
 *   - another user may probe its own processes only (COLL_PROBE_OWN):
 *     process(PID).function(...) of a process of its own, or
 *     function/usdt("BIN:...") of a binary it owns, whose events are
 *     kept to its uid (engine/owner.c); no source that sees every process
 *     or the kernel (syscall, tracepoint, kernel.function, profile,
 *     spans), no cluster query (its uid means nothing on other hosts) and
 *     no standing query;
 *   - a peer whose user cannot be found may not probe (COLL_PROBE_NONE).
 *
 * Every decision is logged (info): the route, the requester, the verdict.
 */
#ifndef FAY_COLLECTOR_REQUESTER_H
#define FAY_COLLECTOR_REQUESTER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "query/query.h"

struct collector;
struct auth_token;

enum coll_probe_right {
	COLL_PROBE_NONE,
	COLL_PROBE_OWN,         /* its own processes (uid) */
	COLL_PROBE_ALL,         /* whatever the collector may */
};

struct coll_requester {
	enum coll_probe_right right;
	uid_t uid;              /* COLL_PROBE_OWN: whose processes */
	char who[256];          /* "uid 65534 (nobody) over loopback", "token ci" */
	char why[200];          /* COLL_PROBE_NONE: why its user is unknown */
};

/*
 * Decide the right of the requester on connection fd (the HTTP client's
 * socket) into *r.  authz: its Authorization header (NULL: none); with
 * tokens http_screen() has checked its probe scope already.
 */
void coll_requester_decide(const struct collector *c, int fd, const char *authz,
			   struct coll_requester *r);

/*
 * May r ask what (e.g. "POST /api/query") of a query whose source is
 * kind (local: runs on this host; cluster: on the agents)?  kind < 0: a
 * request that needs COLL_PROBE_ALL (standing queries).  Returns 0, or
 * 403 with the reason in msg (a line).  Logs the decision either way.
 */
unsigned coll_requester_admit(const struct coll_requester *r, const char *what, int kind,
			      bool cluster, char *msg, size_t msglen);

/*
 * --probe-group NAME: members (by /etc/group and their primary group)
 * may probe everything.  0, or -ENOENT / -errno with the reason in err.
 */
int coll_probe_group_set(struct collector *c, const char *name, char *err, size_t errlen);

/*
 * Without tokens: make a new random probe token and write it to path
 * (mode 0600, replacing the last start's), kept in c.  0, or -errno with
 * the reason in err.
 */
int coll_probe_token_make(struct collector *c, const char *path, char *err, size_t errlen);

#endif
