// SPDX-License-Identifier: MIT
/* Tokens, scopes and agent bindings: see auth.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/auth.h"
#include "collector/collector_int.h"
#include "common/err.h"
#include "common/file_atomic.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/tls.h"

#define TOKEN_MAX 255                   /* a HELLO carries at most this much */

struct binding {
	char agent_id[33];
	char ident[80];
};

/* The tokens of one reading of the file (and --token). */
struct tokset {
	struct auth_token *v;
	size_t n;
	struct tokset *older;           /* replaced by this one at a reload */
};

struct auth {
	/* The tokens now (atomic).  Those a reload replaced are kept until
	 * auth_free(): a request may still hold one of their tokens. */
	struct tokset *ts;
	char *bind_path;
	pthread_mutex_t lock;           /* the bindings */
	struct binding *b;
	size_t nb, capb;
};

static const struct {
	const char *name;
	unsigned bit;
} scope_names[] = {
	{ "read", COLL_SCOPE_READ },
	{ "write", COLL_SCOPE_WRITE },
	{ "probe", COLL_SCOPE_PROBE },
};

/* Contract in auth.h. */
const char *auth_scope_name(unsigned scope)
{
	for (size_t i = 0; i < sizeof(scope_names) / sizeof(scope_names[0]); i++)
		if (scope & scope_names[i].bit)
			return scope_names[i].name;
	return "none";
}

/* "read,write" into *bits.  0 or -EINVAL naming the word. */
static int parse_scopes(const char *s, unsigned *bits, char *err, size_t errlen)
{
	*bits = 0;
	while (*s) {
		size_t n = strcspn(s, ","), i;

		for (i = 0; i < sizeof(scope_names) / sizeof(scope_names[0]); i++)
			if (strlen(scope_names[i].name) == n && !strncmp(s, scope_names[i].name, n))
				break;
		if (i == sizeof(scope_names) / sizeof(scope_names[0])) {
			snprintf(err, errlen, "unknown scope '%.*s' (known: read, write, probe, "
				 "comma-separated)", (int)n, s);
			return -EINVAL;
		}
		*bits |= scope_names[i].bit;
		s += n;
		if (*s == ',' && !*++s) {
			snprintf(err, errlen, "a scope list ends with ','");
			return -EINVAL;
		}
	}
	return 0;
}

/* The token of s whose secret is the n bytes at p, or NULL: every byte
 * of every token compared, so the time says nothing about how much of
 * one a guess got right. */
static const struct auth_token *find(const struct tokset *s, const char *p, size_t n)
{
	const struct auth_token *hit = NULL;

	for (size_t k = 0; s && k < s->n; k++) {
		const struct auth_token *t = &s->v[k];
		unsigned diff = t->len != n;

		for (size_t i = 0; i < t->len; i++)
			diff |= (unsigned char)t->secret[i] ^ (unsigned char)(i < n ? p[i] : 0);
		if (!diff)
			hit = t;
	}
	return hit;
}

static int add_token(struct tokset *a, const char *secret, size_t len, unsigned scopes,
		     const char *name, char *err, size_t errlen)
{
	struct auth_token *nv = realloc(a->v, (a->n + 1) * sizeof(*a->v)), *t;
	char hex[65];
	int ret;

	if (!nv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	a->v = nv;
	t = &a->v[a->n];
	memset(t, 0, sizeof(*t));
	if (len > TOKEN_MAX) {
		snprintf(err, errlen, "the token is longer than %d bytes", TOKEN_MAX);
		return -EINVAL;
	}
	if (find(a, secret, len)) {
		snprintf(err, errlen, "the same token is given twice");
		return -EINVAL;
	}
	if (name && strlen(name) >= sizeof(t->name)) {
		snprintf(err, errlen, "the name is longer than %zu bytes", sizeof(t->name) - 1);
		return -EINVAL;
	}
	t->secret = strndup(secret, len);
	if (!t->secret) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->len = len;
	t->scopes = scopes;
	if (name && *name) {
		snprintf(t->name, sizeof(t->name), "%s", name);
		snprintf(t->ident, sizeof(t->ident), "name:%s", name);
	} else {
		ret = tls_sha256_hex(secret, len, hex);
		if (ret) {
			free(t->secret);
			tls_load(err, errlen);
			return ret;
		}
		snprintf(t->ident, sizeof(t->ident), "sha256:%s", hex);
	}
	a->n++;
	return 0;
}

/* The lines of the token file. */
static int parse_file(struct tokset *a, const char *path, char *text, char *err,
		      size_t errlen)
{
	char why[200];
	int lineno = 0, ret;

	for (char *line = text, *next; line; line = next) {
		char *w[4] = { 0 };
		unsigned bits;
		int nw = 0;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		if (strchr(line, '#'))
			*strchr(line, '#') = '\0';
		char *save = NULL;

		for (char *p = strtok_r(line, " \t\r", &save); p; p = strtok_r(NULL, " \t\r", &save))
			w[nw < 4 ? nw++ : 3] = p;
		if (!nw)
			continue;
		if (nw < 2 || nw > 3) {
			snprintf(err, errlen, "%s:%d: expected TOKEN SCOPES [NAME] (SCOPES: read, "
				 "write, probe, comma-separated)", path, lineno);
			return -EINVAL;
		}
		ret = parse_scopes(w[1], &bits, why, sizeof(why));
		ret = ret ? : add_token(a, w[0], strlen(w[0]), bits, w[2], why, sizeof(why));
		if (ret) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			return ret;
		}
	}
	return 0;
}

static int load_bindings(struct auth *a, char *err, size_t errlen)
{
	FILE *f = fopen(a->bind_path, "re");
	char line[256];
	int lineno = 0;

	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", a->bind_path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct binding b = { 0 };
		char id[64], ident[128];

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%63s %127s", id, ident) != 2 || strlen(id) >= sizeof(b.agent_id) ||
		    strlen(ident) >= sizeof(b.ident)) {
			fclose(f);
			snprintf(err, errlen, "%s:%d: expected AGENT_ID IDENTITY", a->bind_path,
				 lineno);
			return -EINVAL;
		}
		if (a->nb == a->capb) {
			void *nb = realloc(a->b, (a->capb = a->capb ? a->capb * 2 : 64) *
					   sizeof(*a->b));

			if (!nb) {
				fclose(f);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			a->b = nb;
		}
		snprintf(b.agent_id, sizeof(b.agent_id), "%s", id);
		snprintf(b.ident, sizeof(b.ident), "%s", ident);
		a->b[a->nb++] = b;
	}
	fclose(f);
	return 0;
}

static void tokset_free(struct tokset *s)
{
	while (s) {
		struct tokset *older = s->older;

		for (size_t i = 0; i < s->n; i++) {
			explicit_bzero(s->v[i].secret, s->v[i].len);
			free(s->v[i].secret);
		}
		free(s->v);
		free(s);
		s = older;
	}
}

/* Contract in auth.h. */
void auth_free(struct auth *a)
{
	if (!a)
		return;
	tokset_free(a->ts);
	free(a->b);
	free(a->bind_path);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The tokens of path (NULL: none; when given, it must hold one) and
 * token (every scope; NULL: none): a new set, or NULL + errno with the
 * reason in err. */
static struct tokset *tokens_read(const char *path, const char *token, char *err,
				  size_t errlen)
{
	struct tokset *s = calloc(1, sizeof(*s));
	char *text = NULL;
	int ret = -ENOMEM;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (path) {
		ret = secret_file_read(path, &text, err, errlen);
		if (ret)
			goto fail;
		ret = parse_file(s, path, text, err, errlen);
		explicit_bzero(text, strlen(text));
		free(text);
		if (ret)
			goto fail;
		if (!s->n) {
			snprintf(err, errlen, "%s: no token in it (lines TOKEN SCOPES [NAME])", path);
			ret = -EINVAL;
			goto fail;
		}
	}
	if (token) {
		char why[200];

		ret = add_token(s, token, strlen(token), COLL_SCOPE_READ | COLL_SCOPE_WRITE |
				COLL_SCOPE_PROBE, "token", why, sizeof(why));
		if (ret) {
			snprintf(err, errlen, "--token: %s", why);
			goto fail;
		}
	}
	return s;
fail:
	tokset_free(s);
	errno = -ret;
	return NULL;
}

static struct tokset *tokens_now(const struct auth *a)
{
	return a ? __atomic_load_n(&a->ts, __ATOMIC_ACQUIRE) : NULL;
}

/* Contract in auth.h. */
struct auth *auth_new(const char *path, const char *token, const char *bind_path,
		      char *err, size_t errlen)
{
	struct auth *a = calloc(1, sizeof(*a));
	int ret = -ENOMEM;

	if (!a || (bind_path && !(a->bind_path = strdup(bind_path)))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->ts = tokens_read(path, token, err, errlen);
	if (!a->ts) {
		ret = -errno;
		goto fail;
	}
	ret = a->ts->n && a->bind_path ? load_bindings(a, err, errlen) : 0;
	if (!ret)
		return a;
fail:
	auth_free(a);
	errno = -ret;
	return NULL;
}

/* Contract in auth.h. */
int auth_reload(struct auth *a, const char *path, const char *token, char *err,
		size_t errlen)
{
	struct tokset *s;

	if (!path)
		return 0;       /* nothing read from a file: nothing changes */
	s = tokens_read(path, token, err, errlen);
	if (!s)
		return -errno;
	pthread_mutex_lock(&a->lock);
	s->older = a->ts;
	__atomic_store_n(&a->ts, s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* Contract in auth.h. */
int auth_on(const struct auth *a)
{
	struct tokset *s = tokens_now(a);

	return s && s->n;
}

/* Contract in auth.h. */
size_t auth_count(const struct auth *a)
{
	struct tokset *s = tokens_now(a);

	return s ? s->n : 0;
}

/* Contract in auth.h. */
const struct auth_token *auth_find(const struct auth *a, const char *s, size_t n)
{
	return find(tokens_now(a), s, n);
}

/* Contract in auth.h. */
unsigned auth_check_bearer(const struct auth *a, const char *hdr, size_t hlen,
			   unsigned scope, const char *what,
			   const struct auth_token **who, char *msg, size_t msglen)
{
	const struct auth_token *t = NULL;

	if (who)
		*who = NULL;
	if (!auth_on(a) || !scope)
		return 0;
	if (!hdr) {
		snprintf(msg, msglen, "%s needs a token: 'Authorization: Bearer TOKEN' (the "
			 "collector runs with --token-file or --token)\n", what);
		return 401;
	}
	if (hlen < 7 || strncasecmp(hdr, "Bearer ", 7)) {
		snprintf(msg, msglen, "%s: the Authorization header is not 'Bearer TOKEN'\n", what);
		return 401;
	}
	t = auth_find(a, hdr + 7, hlen - 7);
	if (!t) {
		snprintf(msg, msglen, "%s: unknown token\n", what);
		return 401;
	}
	if (who)
		*who = t;
	if (!(t->scopes & scope)) {
		snprintf(msg, msglen, "%s needs the '%s' scope, which token%s%s lacks\n", what,
			 auth_scope_name(scope), t->name[0] ? " " : "", t->name);
		return 403;
	}
	return 0;
}

/* Write every binding to bind_path (a new file renamed over the old one).
 * Called with the lock held. */
static int save_bindings(struct auth *a, char *msg, size_t msglen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret;

	if (!f)
		return -errno;
	fprintf(f, "# agent id -> the credential it is bound to (fay collector, --token-file)\n");
	for (size_t i = 0; i < a->nb; i++)
		fprintf(f, "%s %s\n", a->b[i].agent_id, a->b[i].ident);
	ret = fclose(f) ? -ENOMEM : file_write_atomic(a->bind_path, text, len, 0600, 0);
	if (ret)
		snprintf(msg, msglen, "%s: %s", a->bind_path, strerror(-ret));
	free(text);
	return ret;
}

/* Contract in auth.h. */
int auth_bind_agent(struct auth *a, const char *agent_id, const struct auth_token *tok,
		    char *msg, size_t msglen)
{
	int ret = 0;

	if (!auth_on(a) || !tok)
		return 0;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nb; i++) {
		if (strcmp(a->b[i].agent_id, agent_id))
			continue;
		if (strcmp(a->b[i].ident, tok->ident)) {
			snprintf(msg, msglen, "agent id %s is bound to another credential (%s%s); "
				 "this token may not speak for it", agent_id,
				 !strncmp(a->b[i].ident, "name:", 5) ? "token " : "an unnamed token",
				 !strncmp(a->b[i].ident, "name:", 5) ? a->b[i].ident + 5 : "");
			ret = -EACCES;
		}
		pthread_mutex_unlock(&a->lock);
		return ret;
	}
	if (a->nb == a->capb) {
		void *nb = realloc(a->b, (a->capb = a->capb ? a->capb * 2 : 64) * sizeof(*a->b));

		if (!nb) {
			pthread_mutex_unlock(&a->lock);
			snprintf(msg, msglen, "out of memory");
			return -ENOMEM;
		}
		a->b = nb;
	}
	snprintf(a->b[a->nb].agent_id, sizeof(a->b[a->nb].agent_id), "%s", agent_id);
	snprintf(a->b[a->nb].ident, sizeof(a->b[a->nb].ident), "%s", tok->ident);
	a->nb++;
	if (a->bind_path) {
		ret = save_bindings(a, msg, msglen);
		if (ret)
			a->nb--;
		else
			pr_info("auth: agent id %s bound to %s", agent_id, tok->ident[0] == 'n' ?
				tok->ident : "an unnamed token");
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}
