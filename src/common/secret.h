/* SPDX-License-Identifier: MIT */
/*
 * Files that hold secrets (--token-file, TLS keys): read only when nobody
 * but their owner and group may read them, so a token never sits in a
 * world-readable file (or in `ps`, as a flag's value would).
 */
#ifndef FAY_COMMON_SECRET_H
#define FAY_COMMON_SECRET_H

#include <stddef.h>

/*
 * Read the whole of path (at most 1 MiB) into *text (malloc'ed, NUL-
 * terminated).  Refused with the reason in err: not a regular file,
 * readable or writable by others (mode & 007: "chmod o-rwx"), unreadable,
 * too large.  0 or -errno (-EPERM for the mode).
 */
int secret_file_read(const char *path, char **text, char *err, size_t errlen);

/*
 * The first word of the first line of path that is not blank or a
 * comment ('#'), into out (outlen bytes): a client's token file, which may
 * also be a collector's (TOKEN SCOPES [NAME]: the scopes are not the
 * client's business).  0, or -errno with the reason in err (as
 * secret_file_read(), or no token in the file, or one too long).
 */
int secret_file_token(const char *path, char *out, size_t outlen, char *err, size_t errlen);

#endif
