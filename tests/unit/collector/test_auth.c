// SPDX-License-Identifier: MIT
/*
 * Tokens, scopes and agent bindings (collector/auth.c) on real files: the
 * token file's grammar (comments, names, scopes; every malformed line
 * refused with FILE:LINE and the reason), its mode, the bearer check's
 * 401/403 answers, constant-size compare of near misses, and bindings
 * that survive a reload from the bindings file and refuse another token.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/auth.h"
#include "test.h"

static char dir[] = "/tmp/fay-auth-XXXXXX";

/* Write text to dir/name with mode; its path. */
static const char *file(const char *name, const char *text, mode_t mode)
{
	static char path[4][256];
	static int k;
	char *p = path[k++ % 4];
	FILE *f;

	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	chmod(p, mode);
	return p;
}

/* auth_new() of text: NULL expected, and err must contain want. */
static void refused(const char *text, const char *want, const char *what)
{
	char err[300] = "";
	struct auth *a = auth_new(file("bad", text, 0600), NULL, NULL, err, sizeof(err));

	ok(!a && strstr(err, want), "%s: refused ('%s')", what, err);
	auth_free(a);
}

int main(void)
{
	const struct auth_token *t;
	struct auth *a;
	char err[300], msg[300], bind[300];
	unsigned st;

	if (!mkdtemp(dir))
		skip_all("mkdtemp: %s", strerror(errno));
	snprintf(bind, sizeof(bind), "%s/agent-tokens", dir);

	a = auth_new(NULL, NULL, NULL, err, sizeof(err));
	ok(a && !auth_on(a), "no file, no --token: everyone is trusted");
	is_int(auth_check_bearer(a, NULL, 0, COLL_SCOPE_PROBE, "X", NULL, msg, sizeof(msg)), 0,
	       "... a request without a token passes");
	auth_free(a);

	a = auth_new(file("bad", "t read\n", 0644), NULL, NULL, err, sizeof(err));
	ok(!a && errno == EPERM && strstr(err, "chmod o-rwx"), "mode 0644: EPERM, says how to fix it");
	refused("# nothing\n\n", "no token in it", "a file of comments");
	refused("alone\n", "bad:1: expected TOKEN SCOPES [NAME]", "a token without scopes");
	refused("a read n extra\n", "bad:1: expected", "four words");
	refused("a read\nb reed\n", "bad:2: unknown scope 'reed'", "an unknown scope, line 2");
	refused("a read,\n", "ends with ','", "a trailing comma");
	refused("a read x\na write y\n", "bad:2: the same token is given twice", "a duplicate token");
	refused("a read 0123456789012345678901234567890123456789012345678901234567890123456789\n",
		"the name is longer", "a long name");

	a = auth_new(file("tokens", "# fay tokens\n"
			  "  reader-1 read  alice   # a comment\n"
			  "writer-2\twrite\n"
			  "all-3 read,write,probe ops\n", 0640),
		     "legacy", bind, err, sizeof(err));
	ok(a, "a good file, mode 0640, and --token: loaded (%s)", a ? "" : err);
	if (!a)
		return test_done();
	is_int((int)auth_count(a), 4, "4 tokens (3 lines and --token)");
	t = auth_find(a, "reader-1", 8);
	ok(t && t->scopes == COLL_SCOPE_READ && !strcmp(t->name, "alice") &&
	   !strcmp(t->ident, "name:alice"), "reader-1: read, named alice");
	t = auth_find(a, "writer-2", 8);
	ok(t && t->scopes == COLL_SCOPE_WRITE && !t->name[0] &&
	   !strncmp(t->ident, "sha256:", 7) && strlen(t->ident) == 7 + 64,
	   "an unnamed token is known by the SHA-256 of its secret (%s)", t ? t->ident : "");
	t = auth_find(a, "legacy", 6);
	ok(t && t->scopes == (COLL_SCOPE_READ | COLL_SCOPE_WRITE | COLL_SCOPE_PROBE),
	   "--token has every scope");
	ok(!auth_find(a, "reader-", 7) && !auth_find(a, "reader-12", 9) && !auth_find(a, "", 0),
	   "a prefix, a longer secret, an empty one: no token");

	st = auth_check_bearer(a, NULL, 0, COLL_SCOPE_READ, "GET /x", NULL, msg, sizeof(msg));
	ok(st == 401 && strstr(msg, "GET /x needs a token"), "no header: 401 (%s)", msg);
	st = auth_check_bearer(a, "Basic abc", 9, COLL_SCOPE_READ, "GET /x", NULL, msg, sizeof(msg));
	ok(st == 401 && strstr(msg, "not 'Bearer TOKEN'"), "Basic: 401");
	st = auth_check_bearer(a, "Bearer nope", 11, COLL_SCOPE_READ, "GET /x", NULL, msg,
			       sizeof(msg));
	ok(st == 401 && strstr(msg, "unknown token"), "an unknown token: 401");
	st = auth_check_bearer(a, "bearer reader-1", 15, COLL_SCOPE_PROBE, "POST /api/query", &t,
			       msg, sizeof(msg));
	ok(st == 403 && t && strstr(msg, "needs the 'probe' scope, which token alice lacks"),
	   "read token, probe route: 403 naming both (%s)", msg);
	is_int(auth_check_bearer(a, "Bearer all-3", 12, COLL_SCOPE_PROBE, "X", NULL, msg,
				 sizeof(msg)), 0, "every scope: passes");
	is_int(auth_check_bearer(a, NULL, 0, 0, "GET /health", NULL, msg, sizeof(msg)), 0,
	       "an open route: passes without a token");

	t = auth_find(a, "writer-2", 8);
	is_int(auth_bind_agent(a, "0123456789abcdef0123456789abcdef", t, msg, sizeof(msg)), 0,
	       "first HELLO of an id: bound");
	is_int(auth_bind_agent(a, "0123456789abcdef0123456789abcdef", t, msg, sizeof(msg)), 0,
	       "the same token again: fine");
	is_int(auth_bind_agent(a, "0123456789abcdef0123456789abcdef", auth_find(a, "all-3", 5),
			       msg, sizeof(msg)), -EACCES, "another token for the id: -EACCES");
	ok(strstr(msg, "bound to another credential (an unnamed token)"), "... saying so (%s)", msg);
	auth_free(a);

	a = auth_new(file("tokens2", "writer-2 write\nall-3 probe ops\n", 0600), NULL, bind,
		     err, sizeof(err));
	ok(a, "reloaded with the bindings file");
	is_int(auth_bind_agent(a, "0123456789abcdef0123456789abcdef", auth_find(a, "all-3", 5),
			       msg, sizeof(msg)), -EACCES, "after a restart the binding holds");
	is_int(auth_bind_agent(a, "0123456789abcdef0123456789abcdef", auth_find(a, "writer-2", 8),
			       msg, sizeof(msg)), 0, "... for its own token");
	auth_free(a);
	{
		struct stat sb;

		ok(!stat(bind, &sb) && (sb.st_mode & 0777) == 0600, "the bindings file is 0600");
	}
	file("agent-tokens", "lonely\n", 0600);
	a = auth_new(file("tokens2", "writer-2 write\n", 0600), NULL, bind, err, sizeof(err));
	ok(!a && strstr(err, "agent-tokens:1: expected AGENT_ID IDENTITY"),
	   "a damaged bindings file: refused with its line (%s)", err);
	auth_free(a);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			diag("cannot remove %s", dir);
	}
	return test_done();
}
