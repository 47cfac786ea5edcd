/* SPDX-License-Identifier: MIT */
/*
 * Who may do what on the collector (issue #10): the tokens of
 * --token-file (and --token), their scopes (enum coll_scope below),
 * and which credential each agent id is bound to.
 *
 * The token file: one token a line, "TOKEN SCOPES [NAME]", SCOPES a
 * comma-separated list of read, write and probe; '#' starts a comment;
 * the file must not be readable by every user (common/secret.h).  A token
 * with a NAME is known by it (so a token can be replaced by another of
 * the same name); one without by the SHA-256 of its secret.
 *
 * An agent id is bound to the credential of its first HELLO (kept in
 * STORE.agent-tokens): afterwards only a token with that identity may
 * speak for the id, so nobody can ship batches (or take a seq) as another
 * agent.
 */
#ifndef FAY_COLLECTOR_AUTH_H
#define FAY_COLLECTOR_AUTH_H

#include <stddef.h>

/* What a token allows (--token-file; auth.c): a route or a frame needs one. */
enum coll_scope {
	COLL_SCOPE_READ  = 1u << 0,     /* query API, UI, /api/v2 reads, /api/sql */
	COLL_SCOPE_WRITE = 1u << 1,     /* ingest: Zipkin, OTLP, agents' batches */
	COLL_SCOPE_PROBE = 1u << 2,     /* /api/query, cluster queries: load BPF */
};

struct auth;

struct auth_token {
	char *secret;
	size_t len;
	unsigned scopes;                /* COLL_SCOPE_* bits */
	char name[64];                  /* "" when the line has none */
	char ident[80];                 /* "name:NAME" or "sha256:HEX" */
};

/*
 * Tokens from path (NULL: none) and token (--token: every scope, NULL:
 * none); agent bindings kept in bind_path (NULL: in memory only).  With
 * neither path nor token, the result holds no token (auth_on() is 0).
 * NULL + errno with the reason in err (the file's mode, its line and
 * what is wrong there, the bindings file).
 */
struct auth *auth_new(const char *path, const char *token, const char *bind_path,
		      char *err, size_t errlen);
void auth_free(struct auth *a);
/*
 * Read path (and token) again, as auth_new() did (SIGHUP): new requests
 * and HELLOs see the new tokens at once; a token already found stays
 * valid (the old ones are kept until auth_free()); bindings are kept, so
 * a token that keeps its NAME keeps its agents.  A file that cannot be
 * used (unreadable, its mode, a bad line, no token) changes nothing: -errno
 * with the reason in err.  path NULL: 0, nothing read.
 */
int auth_reload(struct auth *a, const char *path, const char *token, char *err,
		size_t errlen);
/* Are tokens required (1), or is everyone trusted (0; a NULL a too)? */
int auth_on(const struct auth *a);
/* How many tokens were loaded. */
size_t auth_count(const struct auth *a);

/* The token whose secret is the n bytes at s, or NULL.  Every token is
 * compared in full, in time independent of where a guess differs. */
const struct auth_token *auth_find(const struct auth *a, const char *s, size_t n);

/* "read", "write", "probe" (one bit), or "read,write..." is not given:
 * the name of the lowest bit set. */
const char *auth_scope_name(unsigned scope);

/*
 * May the holder of an "Authorization" value (hdr, hlen bytes, NULL when
 * absent) do what needs scope (one COLL_SCOPE_* bit, or 0: anyone)?
 * Returns 0, or 401 (no or unknown token) / 403 (the token lacks the
 * scope) with the reason in msg naming what (e.g. "POST /api/query").
 * *who gets the token (NULL when none) when who is not NULL.
 */
unsigned auth_check_bearer(const struct auth *a, const char *hdr, size_t hlen,
			   unsigned scope, const char *what,
			   const struct auth_token **who, char *msg, size_t msglen);

/*
 * Bind agent_id to tok's identity, or check it is bound to it.  The first
 * binding of an id is written to the bindings file before this returns.
 * 0, -EACCES when the id is bound to another credential (msg says so), or
 * -errno when the binding cannot be kept (msg says why).
 */
int auth_bind_agent(struct auth *a, const char *agent_id, const struct auth_token *tok,
		    char *msg, size_t msglen);

#endif
