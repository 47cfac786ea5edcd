/* SPDX-License-Identifier: MIT */
/* Option values shared by the subcommands (opts.c). */
#ifndef FAY_CLI_OPTS_H
#define FAY_CLI_OPTS_H

#include <stdint.h>

/* A size: "4096", "64k", "256M", "2G", "1T" (powers of 1024, an optional
 * trailing B).  Returns 0 with *out set, or -EINVAL (not a size, or it
 * overflows). */
int opt_parse_size(const char *s, uint64_t *out);

#endif
