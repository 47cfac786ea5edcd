// SPDX-License-Identifier: MIT
/* Option values shared by the subcommands. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/opts.h"
#include "cli/traces.h"
#include "common/secret.h"

int opt_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

/* Contract in opts.h. */
const char *opt_env_token(void)
{
	const char *env = getenv("FAY_TOKEN");

	return env && *env ? env : NULL;
}

/* Contract in opts.h. */
int opt_token(const char *file, char *buf, size_t len, const char **token)
{
	char err[600];

	*token = opt_env_token();
	if (!file)
		return 0;
	if (secret_file_token(file, buf, len, err, sizeof(err))) {
		fprintf(stderr, "error: --token-file %s\n", err);
		return -1;
	}
	*token = buf;
	return 0;
}

void opt_client_token_init(struct opt_client_token *t)
{
	t->token = opt_env_token();
	t->file = NULL;
	t->buf[0] = '\0';
}

int opt_client_token(int opt, const char *arg, struct opt_client_token *t)
{
	switch (opt) {
	case OPT_TOKEN:
		t->token = arg;
		t->file = NULL;
		return 1;
	case OPT_TOKEN_FILE:
		if (opt_token(arg, t->buf, sizeof(t->buf), &t->token))
			return -1;
		t->file = arg;
		return 1;
	}
	return 0;
}

int opt_client_tls(int opt, const char *arg)
{
	/* tr_http_set_cert() takes both at once */
	static const char *cert, *key;

	switch (opt) {
	case OPT_TLS_CA:
		tr_http_set_ca(arg);
		return 1;
	case OPT_TLS_CERT:
		cert = arg;
		tr_http_set_cert(cert, key);
		return 1;
	case OPT_TLS_KEY:
		key = arg;
		tr_http_set_cert(cert, key);
		return 1;
	}
	return 0;
}
