// SPDX-License-Identifier: MIT
/* Prometheus text exposition helpers. */
#include "common/prom.h"

void prom_label(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}
