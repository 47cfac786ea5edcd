// SPDX-License-Identifier: MIT
/*
 * FayQL's front end, planner and code generator, as POST /api/query and
 * `fay query --emit=bpf` run them, without loading anything: the input is
 * a query's text; it is parsed, checked, planned (the cluster form too),
 * its AST and plan dumped, and its programs generated and lowered to eBPF
 * (engine_new with emit_only, tracepoint formats from tests/golden/tracefs
 * so that every run sees the same "kernel").  Any crash, hang, leak or
 * sanitizer report is a finding; refusals are the expected outcome for
 * most inputs.  Property: an error always has a message.
 */
#include <string.h>

#include "engine/engine.h"
#include "query/plan.h"
#include "query/query.h"
#include "fuzz.h"

static const char *tracefs = "tests/golden/tracefs";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *t = getenv("FAY_FUZZ_TRACEFS");

	fuzz_quiet();
	if (t)
		tracefs = t;
	return 0;
}

static void one(const uint8_t *data, size_t size, bool cluster)
{
	struct query_opts o = { .sz = sizeof(o), .tracefs = tracefs, .cluster = cluster };
	struct query *q = query_new("<fuzz>", (const char *)data, size, &o);
	const struct plan *p = NULL;
	FILE *null = fopen("/dev/null", "w");
	int err;

	if (!q || !null) {
		query_free(q);
		if (null)
			fclose(null);
		return;
	}
	err = query_parse(q);
	err = err ? : query_check(q);
	if (!err)
		query_dump_ast(q, null);

	err = err ? : query_plan(q, &p);
	if (!err)
		plan_dump(p, null);
	FUZZ_CHECK(err != -EINVAL || query_error(q), "-EINVAL without a message");
	if (!err && !cluster) {
		struct engine_opts eo = { .sz = sizeof(eo), .emit_only = true };
		char why[512];
		struct engine *e = engine_new(q, p, &eo, why, sizeof(why));

		if (e) {
			engine_dump_bpf(e, null);
			engine_free(e);
		}
	}
	fclose(null);
	query_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	one(data, size, false);
	one(data, size, true);
	return 0;
}
