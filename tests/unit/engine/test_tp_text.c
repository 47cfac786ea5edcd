// SPDX-License-Identifier: MIT
/*
 * Every text field of every tracepoint, through the kernel's verifier:
 * walks events/SYS/EVENT/format of this kernel's tracefs, and for each
 * char[N] and __data_loc char[] field compiles and loads (engine_load, no
 * attach) three queries, the field as a group key, in a filter and as a
 * streamed column.  A char[] field at an offset that is not a multiple of
 * 8 was copied with 8-byte stores to a misaligned stack slot, which the
 * verifier refuses; about 40 fields of a 6.18 kernel sit at such offsets
 * (issue #12).  The made-up event of the golden tests
 * (tests/golden/tracefs/events/fay_golden/text_offsets: one field at each
 * offset modulo 8, the residues no real kernel field has included) is
 * loaded the same way, under the name of a real event.  Every field named
 * like a FayQL keyword (order, group, from ...) is loaded in a filter, a
 * key and an aggregate.
 */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "common/tracefs.h"
#include "engine/engine.h"
#include "query/plan.h"
#include "query/query.h"

enum role { R_KEY, R_FILTER, R_COLUMN, R_N };
static const char *const role_name[R_N] = { "a group key", "a filter", "a streamed column" };

struct tally {
	int fields, by_residue[8];
	int loaded[R_N], failed[R_N];
	int kw_fields, kw_loaded;	/* fields named like a FayQL keyword */
};

static const char *const keywords[] = {
	"from", "in", "where", "let", "group", "by", "into", "select",
	"window", "for", "order", "desc", "asc", "limit",
};

static bool is_keyword(const char *name)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (!strcmp(name, keywords[i]))
			return true;
	return false;
}

/* Compile and load one query; 0 when the kernel took every program. */
static int load_one(const char *tracefs, const char *text, char *why, size_t n)
{
	struct query_opts qo = { .sz = sizeof(qo), .tracefs = tracefs };
	struct query *q = query_new("<test>", text, strlen(text), &qo);
	const struct plan *p;
	struct engine *e = NULL;
	char err[1024] = "";
	int rc = -1;

	if (!q) {
		snprintf(why, n, "query_new: %s", strerror(errno));
		return -1;
	}
	if (query_plan(q, &p)) {
		snprintf(why, n, "%s", query_error(q) ? query_error(q) : "plan failed");
		goto out;
	}
	e = engine_new(q, p, NULL, err, sizeof(err));
	if (!e) {
		snprintf(why, n, "engine_new: %s%s", err, query_error(q) ? query_error(q) : "");
		goto out;
	}
	if (engine_load(e)) {
		snprintf(why, n, "load: %s", engine_error(e));
		goto out;
	}
	rc = 0;
out:
	engine_free(e);
	query_free(q);
	return rc;
}

static void one_field(const char *tracefs, const char *sys, const char *ev,
		      const struct tracefs_field *f, struct tally *t)
{
	char text[512], why[2048];

	t->fields++;
	if (!f->data_loc)
		t->by_residue[f->offset & 7]++;
	for (int r = 0; r < R_N; r++) {
		switch (r) {
		case R_KEY:
			snprintf(text, sizeof(text),
				 "from t in tracepoint(\"%s:%s\") group t by t.%s into g select { k: g.key, n: g.count() }",
				 sys, ev, f->name);
			break;
		case R_FILTER:
			snprintf(text, sizeof(text),
				 "from t in tracepoint(\"%s:%s\") where t.%s != \"\" select { n: count() }",
				 sys, ev, f->name);
			break;
		default:
			snprintf(text, sizeof(text),
				 "from t in tracepoint(\"%s:%s\") select { f: t.%s }",
				 sys, ev, f->name);
			break;
		}
		if (load_one(tracefs, text, why, sizeof(why))) {
			t->failed[r]++;
			diag("%s:%s %s (%s at offset %d) as %s: %.600s", sys, ev,
			     f->name, f->ctype, f->offset, role_name[r], why);
		} else {
			t->loaded[r]++;
		}
	}
}

/* A field named like a keyword (t.order, t.group) in a filter, a key
 * and an aggregate: reachable after '.' (issue #12). */
static void keyword_field(const char *tracefs, const char *sys, const char *ev,
			  const struct tracefs_field *f, struct tally *t)
{
	char text[512], why[2048];

	t->kw_fields++;
	if (f->is_string)
		snprintf(text, sizeof(text),
			 "from t in tracepoint(\"%s:%s\") where t.%s != \"\" group t by t.%s into g select { k: g.key, n: g.count() }",
			 sys, ev, f->name, f->name);
	else
		snprintf(text, sizeof(text),
			 "from t in tracepoint(\"%s:%s\") where t.%s >= 0 group t by t.%s into g select { k: g.key, s: g.sum(t.%s) }",
			 sys, ev, f->name, f->name, f->name);
	if (load_one(tracefs, text, why, sizeof(why)))
		diag("%s:%s %s (%s): %.600s", sys, ev, f->name, f->ctype, why);
	else
		t->kw_loaded++;
}

static void one_event(const char *tracefs, const char *sys, const char *ev,
		      struct tally *t)
{
	char path[4096], line[1024];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/events/%s/%s/format", tracefs, sys, ev);
	fp = fopen(path, "r");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		struct tracefs_field f;

		if (tracefs_parse_field(line, &f) != 1 || !strncmp(f.name, "common_", 7))
			continue;
		if (f.is_string)
			one_field(tracefs, sys, ev, &f, t);
		if (is_keyword(f.name) && !f.is_array)
			keyword_field(tracefs, sys, ev, &f, t);
	}
	fclose(fp);
}

/* Every event of every subsystem under tracefs/events. */
static void walk(const char *tracefs, struct tally *t)
{
	char path[4096];
	DIR *d, *sd;
	struct dirent *s, *e;

	snprintf(path, sizeof(path), "%s/events", tracefs);
	d = opendir(path);
	if (!d)
		return;
	while ((s = readdir(d))) {
		if (s->d_name[0] == '.')
			continue;
		/* ftrace's own events are not tracepoints a program can use */
		if (!strcmp(s->d_name, "ftrace"))
			continue;
		snprintf(path, sizeof(path), "%s/events/%s", tracefs, s->d_name);
		sd = opendir(path);
		if (!sd)
			continue;
		while ((e = readdir(sd)))
			if (e->d_name[0] != '.')
				one_event(tracefs, s->d_name, e->d_name, t);
		closedir(sd);
	}
	closedir(d);
}

static void report(const char *what, const struct tally *t)
{
	char res[128];
	int n = 0;

	for (int i = 0; i < 8; i++)
		n += snprintf(res + n, sizeof(res) - n, "%s%d", i ? " " : "", t->by_residue[i]);
	diag("%s: %d text fields; inline char[] by offset mod 8 (0..7): %s", what,
	     t->fields, res);
	for (int r = 0; r < R_N; r++)
		ok(t->failed[r] == 0 && t->loaded[r] == t->fields,
		   "%s: every text field loads as %s (%d of %d)", what, role_name[r],
		   t->loaded[r], t->fields);
}

#define GOLDEN "tests/golden/tracefs/events/fay_golden/text_offsets/format"

/* A temporary tracefs tree whose signal:signal_generate has the golden
 * text_offsets fields; its path in dir. */
static int golden_as_real(char *dir, size_t n)
{
	char path[512], buf[4096];
	size_t len;
	FILE *in, *out;

	in = fopen(GOLDEN, "r");
	if (!in)
		return -1;
	len = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	snprintf(dir, n, "/tmp/fay-tptext.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/events", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/events/signal", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/events/signal/signal_generate", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/events/signal/signal_generate/format", dir);
	out = fopen(path, "w");
	if (!out)
		return -1;
	fwrite(buf, 1, len, out);
	return fclose(out);
}

static void rm_golden(const char *dir)
{
	static const char *const parts[] = {
		"/events/signal/signal_generate/format", "/events/signal/signal_generate",
		"/events/signal", "/events", "",
	};
	char path[512];

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", dir, parts[i]);
		remove(path);
	}
}

int main(void)
{
	struct tally k = { 0 }, g = { 0 };
	char dir[256];
	const char *tracefs;
	int misaligned = 0;

	if (geteuid() != 0)
		skip_all("needs root (loads BPF programs)");
	tracefs = tracefs_find();
	if (!tracefs)
		skip_all("no tracefs");

	walk(tracefs, &k);
	ok(k.fields > 0, "this kernel has text fields (%d)", k.fields);
	for (int i = 1; i < 8; i++)
		misaligned += k.by_residue[i];
	ok(misaligned > 0, "%d of them at offsets that are not a multiple of 8", misaligned);
	report("this kernel", &k);
	ok(k.kw_fields > 0 && k.kw_loaded == k.kw_fields,
	   "every field named like a keyword loads in a filter, a key and an aggregate (%d of %d)",
	   k.kw_loaded, k.kw_fields);

	/* The golden tests' made-up event, a field at each offset mod 8,
	 * under the name of a real one (the engine attaches by name; the
	 * verifier checks context reads against the offsets, not the event). */
	if (golden_as_real(dir, sizeof(dir)) == 0) {
		one_event(dir, "signal", "signal_generate", &g);
		for (int i = 0; i < 8; i++)
			is_int(g.by_residue[i], 1, "text_offsets has a field at offset %d mod 8", i);
		report("fay_golden:text_offsets as signal:signal_generate", &g);
		rm_golden(dir);
	} else {
		diag("not run from the source tree: fay_golden:text_offsets skipped");
	}
	return test_done();
}
