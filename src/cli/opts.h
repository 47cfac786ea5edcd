/* SPDX-License-Identifier: MIT */
/* Option values shared by the subcommands (opts.c). */
#ifndef FAY_CLI_OPTS_H
#define FAY_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>

/* A size: "4096", "64k", "256M", "2G", "1T" (powers of 1024, an optional
 * trailing B).  Returns 0 with *out set, or -EINVAL (not a size, or it
 * overflows). */
int opt_parse_size(const char *s, uint64_t *out);

/*
 * The token a client sends to the collector: the first token of file
 * (--token-file, NULL: none) into buf, else $FAY_TOKEN when set and not
 * empty, else none.  Returns 0 with *token set (NULL: none), or -1 after
 * printing the reason (the file's mode, no token in it) on stderr.
 */
int opt_token(const char *file, char *buf, size_t len, const char **token);

/* $FAY_TOKEN, the default of every --token option, or NULL when it is
 * unset or empty. */
const char *opt_env_token(void);

/*
 * --tls-ca FILE, --tls-cert FILE, --tls-key FILE: the TLS options of every
 * command that is a client of a collector (query --cluster, sql, traces
 * ls and show over HTTP; the agent over the wire protocol).  One option
 * ID each, and their getopt_long() rows in OPT_CLIENT_TLS_ROWS; each
 * command's --help describes them in its own columns.
 */
enum { OPT_TLS_CA = 0x7100, OPT_TLS_CERT, OPT_TLS_KEY, OPT_TOKEN, OPT_TOKEN_FILE, OPT_CLUSTER };
#define OPT_CLIENT_TLS_ROWS \
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA }, \
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT }, \
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY }

/* The --help text of OPT_CLIENT_TLS_ROWS, PAD as OPT_CLIENT_TOKEN_HELP's. */
#define OPT_CLIENT_TLS_HELP(PAD) \
"    --tls-ca FILE\n" \
PAD "the CA of an https:// collector's certificate\n" \
PAD "(default $FAY_TLS_CA, else the system's)\n" \
"    --tls-cert FILE --tls-key FILE\n" \
PAD "this client's certificate and key, for a collector\n" \
PAD "with --tls-client-ca (default $FAY_TLS_CERT,\n" \
PAD "$FAY_TLS_KEY)\n"

/*
 * For the HTTP clients: hand option opt (its argument arg) to the HTTP
 * client (tr_http_set_ca(), tr_http_set_cert(): traces.h) when it is one
 * of OPT_CLIENT_TLS_ROWS.  Returns 1 when it was, 0 otherwise.
 */
int opt_client_tls(int opt, const char *arg);

/*
 * --token T, --token-file FILE: the token every client of a collector
 * sends (query --cluster, sql --collector, traces, capture, the agent),
 * their getopt_long() rows in OPT_CLIENT_TOKEN_ROWS, parsed by
 * opt_client_token(), described by OPT_CLIENT_TOKEN_HELP(PAD, SCOPE) in
 * each command's --help: PAD the command's description column (a string
 * of spaces, at most 28: the text is 52 columns wide), SCOPE the scope
 * the command needs ("read", ...).
 */
#define OPT_CLIENT_TOKEN_ROWS \
	{ "token", required_argument, NULL, OPT_TOKEN }, \
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE }
#define OPT_CLIENT_TOKEN_HELP(PAD, SCOPE) \
"    --token-file FILE, --token T\n" \
PAD "the collector's token (its '" SCOPE "' scope): the\n" \
PAD "first word of the first line of FILE that is not\n" \
PAD "a comment ('#'; FILE must not be readable by every\n" \
PAD "user), or T itself (seen in ps: prefer FILE); the\n" \
PAD "last one given counts (default $FAY_TOKEN)\n"

/* What OPT_CLIENT_TOKEN_ROWS gave: the token to send. */
struct opt_client_token {
	const char *token;	/* NULL: none */
	const char *file;	/* the --token-file it came from, else NULL */
	char buf[256];		/* --token-file's token */
};

/* Before the options: $FAY_TOKEN (opt_env_token()), no file. */
void opt_client_token_init(struct opt_client_token *t);

/*
 * Take option opt (its argument arg) when it is one of
 * OPT_CLIENT_TOKEN_ROWS: --token-file is read now.  Returns 1 when it
 * was, 0 when opt is another option, -1 after printing why the file
 * gives no token (its mode, no token in it) on stderr.
 */
int opt_client_token(int opt, const char *arg, struct opt_client_token *t);

/*
 * --cluster URL: the collector a command asks (query, capture), its
 * getopt_long() row OPT_CLUSTER_ROW and the first lines of its --help
 * text OPT_CLUSTER_HELP(PAD), PAD as above; each command adds what it
 * does there.
 */
#define OPT_CLUSTER_ROW { "cluster", required_argument, NULL, OPT_CLUSTER }
#define OPT_CLUSTER_HELP(PAD) \
"    --cluster URL\n" \
PAD "the collector at URL, its HTTP address\n" \
PAD "(http://HOST:9411; https:// with --tls-ca)\n"

#endif
