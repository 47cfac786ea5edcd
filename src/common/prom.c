// SPDX-License-Identifier: MIT
/* The Prometheus text writer. */
#include <inttypes.h>

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

void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_u64(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	prom_family(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

void prom_fields(FILE *f, const struct prom_field *fs, size_t n, const void *base)
{
	for (size_t i = 0; i < n; i++)
		prom_u64(f, fs[i].name, fs[i].gauge ? "gauge" : "counter", fs[i].help,
			 __atomic_load_n((const uint64_t *)((const char *)base + fs[i].off),
					 __ATOMIC_RELAXED));
}
