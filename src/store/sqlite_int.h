/* SPDX-License-Identifier: MIT */
/* Private to the SQLite store (src/store/sqlite*.c, schema.c). */
#ifndef FAY_STORE_SQLITE_INT_H
#define FAY_STORE_SQLITE_INT_H

#include "store/span.h"

struct store_reader;

/* src/store/schema.sql, NUL-terminated (src/store/schema.c). */
extern const char store_schema_sql[];

#define STORE_APP_ID         0x46415953  /* "FAYS" */
#define STORE_SCHEMA_VERSION 1

#ifdef SQLITE_VERSION
/* Column i as a string copied into a (absent: len 0).  0 or -ENOMEM. */
int sq_col_str(sqlite3_stmt *s, int i, struct zarena *a, struct zs_str *out);
/* Columns i..i+3 (service, ipv4, ipv6, port) as an endpoint. */
int sq_col_ep(sqlite3_stmt *s, int i, struct zarena *a, struct zs_endpoint *e);
/* The connection of a reader (store/scan.c prepares its own statements). */
sqlite3 *sq_reader_db(struct store_reader *r);
#endif

#endif
