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
enum { OPT_TLS_CA = 0x7100, OPT_TLS_CERT, OPT_TLS_KEY };
#define OPT_CLIENT_TLS_ROWS \
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA }, \
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT }, \
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY }

/*
 * For the HTTP clients: hand option opt (its argument arg) to the HTTP
 * client (tr_http_set_ca(), tr_http_set_cert(): traces.h) when it is one
 * of OPT_CLIENT_TLS_ROWS.  Returns 1 when it was, 0 otherwise.
 */
int opt_client_tls(int opt, const char *arg);

#endif
