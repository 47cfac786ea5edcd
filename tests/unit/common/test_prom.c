// SPDX-License-Identifier: MIT
/* src/common/prom.c, the one Prometheus text writer: a family's head, a
 * one-sample family, a table of counters read from a struct (counters and
 * gauges, in order, values up to 2^64-1), label values escaped (backslash,
 * quote, newline; NULL writes nothing; UTF-8 passes through). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/prom.h"
#include "test.h"

static char out[4096];
static FILE *f;

static void open_out(void)
{
	memset(out, 0, sizeof(out));
	f = fmemopen(out, sizeof(out), "w");
}

static const char *close_out(void)
{
	fclose(f);
	return out;
}

struct counters {
	uint64_t a, b, c;
};

int main(void)
{
	static const struct prom_field fs[] = {
		{ "x_a_total", "A things.", offsetof(struct counters, a), 0 },
		{ "x_c", "C now.", offsetof(struct counters, c), 1 },
		{ "x_b_total", "B things.", offsetof(struct counters, b), 0 },
	};
	struct counters cs = { .a = 1, .b = UINT64_MAX, .c = 0 };

	open_out();
	prom_family(f, "fay_x_total", "counter", "Xs seen.");
	is_str(close_out(), "# HELP fay_x_total Xs seen.\n# TYPE fay_x_total counter\n",
	       "prom_family: HELP then TYPE");

	open_out();
	prom_u64(f, "fay_up", "gauge", "1 while up.", 1);
	is_str(close_out(), "# HELP fay_up 1 while up.\n# TYPE fay_up gauge\nfay_up 1\n",
	       "prom_u64: head and one sample");

	open_out();
	prom_fields(f, fs, 3, &cs);
	is_str(close_out(),
	       "# HELP x_a_total A things.\n# TYPE x_a_total counter\nx_a_total 1\n"
	       "# HELP x_c C now.\n# TYPE x_c gauge\nx_c 0\n"
	       "# HELP x_b_total B things.\n# TYPE x_b_total counter\n"
	       "x_b_total 18446744073709551615\n",
	       "prom_fields: the table's order, types and offsets; 2^64-1 whole");

	open_out();
	prom_fields(f, fs, 0, &cs);
	is_str(close_out(), "", "prom_fields of no field writes nothing");

	open_out();
	prom_label(f, "a\\b\"c\nd");
	is_str(close_out(), "a\\\\b\\\"c\\nd", "prom_label escapes \\, \" and newline");

	open_out();
	prom_label(f, "caf\xc3\xa9 \t{x=1}");
	is_str(close_out(), "caf\xc3\xa9 \t{x=1}", "prom_label passes the rest through");

	open_out();
	prom_label(f, NULL);
	prom_label(f, "");
	is_str(close_out(), "", "prom_label of NULL or \"\" writes nothing");
	return test_done();
}
