/* SPDX-License-Identifier: MIT */
/* Prometheus text exposition helpers (format 0.0.4). */
#ifndef FAY_COMMON_PROM_H
#define FAY_COMMON_PROM_H

#include <stdio.h>

/* Write s as a label value: backslash, double quote and newline escaped.
 * NULL writes nothing. */
void prom_label(FILE *f, const char *s);

#endif
