/* SPDX-License-Identifier: MIT */
/*
 * The one Prometheus text writer (exposition format 0.0.4), for every
 * /metrics fay serves: the collector's and the agent's.  A family is its
 * "# HELP" and "# TYPE" lines followed by its samples; the callers write
 * labelled samples themselves, with prom_label() for the values.
 */
#ifndef FAY_COMMON_PROM_H
#define FAY_COMMON_PROM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Write s as a label value: backslash, double quote and newline escaped.
 * NULL writes nothing. */
void prom_label(FILE *f, const char *s);

/* The head of a family: "# HELP name help\n# TYPE name type\n" (type:
 * "counter", "gauge", ...). */
void prom_family(FILE *f, const char *name, const char *type, const char *help);

/* A family of one sample without labels: its head and "name v\n". */
void prom_u64(FILE *f, const char *name, const char *type, const char *help, uint64_t v);

/* One uint64_t of a struct of counters, written as a family of one sample. */
struct prom_field {
	const char *name, *help;
	size_t off;             /* offsetof() the counter in the struct */
	int gauge;              /* 1: a gauge, 0: a counter */
};

/* prom_u64() of each of the n fields of base, in order, each read with a
 * relaxed atomic load (counters other threads add to). */
void prom_fields(FILE *f, const struct prom_field *fs, size_t n, const void *base);

#endif
