// SPDX-License-Identifier: MIT
/*
 * Front end and planner through the C API the back end uses: error
 * positions, pairing decisions, saved entry slots, predicate placement,
 * key/value layouts, read-side evaluation of columns, and that every
 * pass survives hostile input (run under ASan/UBSan).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query/plan.h"
#include "query/query.h"
#include "test.h"

static struct query *compile(const char *text, const struct plan **p)
{
	struct query_opts o = { .sz = sizeof(o), .tracefs = "tests/golden/tracefs" };
	struct query *q = query_new("<t>", text, strlen(text), &o);

	if (q && query_plan(q, p))
		*p = NULL;
	return q;
}

static void test_errors(void)
{
	const struct plan *p;
	struct query *q;
	int line, col;

	q = compile("from s in syscall(\"read\")\n  select s.arg(6)", &p);
	ok(q && !p, "arg(6) does not plan");
	query_error_pos(q, &line, &col);
	is_int(line, 2, "error line");
	is_int(col, 16, "error column (the index)");
	ok(strstr(query_error_msg(q), "arg(6) is out of range") != NULL,
	   "message says arg(6) is out of range");
	ok(!strncmp(query_error(q), "<t>:2:16: error: ", 17), "formatted prefix");
	ok(strstr(query_error(q), "\n  select s.arg(6)\n               ^\n") != NULL,
	   "source line and caret under column 16");
	query_free(q);

	q = compile("", &p);
	ok(q && !p && strstr(query_error(q), "expected 'from'"), "empty query: expected 'from'");
	query_free(q);
	query_free(NULL);
	errno = 0;
	ok(query_new(NULL, "x", 1, NULL) == NULL && errno == EINVAL, "NULL source: EINVAL");
}

static void test_pairing(void)
{
	const struct plan *p;
	struct query *q;

	q = compile("from s in syscall(\"read\") where s.arg(0) == 3 select { n: count() }", &p);
	ok(p && !p->paired && p->exit.kind == PA_NONE, "no ret/duration: no exit probe");
	ok(p && p->pred && p->pred->op == PX_EQ && p->pred->a->op == PX_ARG,
	   "unpaired: the where runs on the entry argument");
	ok(p && p->entry.kind == PA_TRACEPOINT && !strcmp(p->entry.event, "sys_enter_read") &&
	   p->entry.args_off == 16, "syscall read: sys_enter_read, args at 16");
	query_free(q);

	q = compile("from s in syscall(\"read\") where s.arg(0) == 3 && s.ret > 0 "
		    "select { n: count(), b: sum(s.ret), d: hist(s.duration) }", &p);
	ok(p && p->paired && p->exit.kind == PA_TRACEPOINT && p->exit.ret_off == 16,
	   "ret used: exit probe at sys_exit_read, ret at 16");
	ok(p && p->entry_pred && p->entry_pred->op == PX_EQ &&
	   p->entry_pred->a->op == PX_ARG, "arg(0) == 3 decided at entry");
	ok(p && p->pred && p->pred->op == PX_GT && p->pred->a->op == PX_FIELD &&
	   p->pred->a->field == F_RET, "ret > 0 decided at exit");
	ok(p && p->nsaved == 1 && p->saved[0].kind == SAVE_TIME,
	   "only the entry time is carried (arg(0) is not used at exit)");
	ok(p && p->mode == PLAN_AGGREGATE && p->key_size == 0 && p->naggrs == 3,
	   "free aggregates: no key, three aggregates");
	ok(p && p->aggrs[1].offset == 8 && p->aggrs[2].offset == 16 &&
	   p->value_size == 16 + 8 * AGGR_HIST_BUCKETS, "value layout: count, sum, hist");
	ok(p && p->cols[2].type == VT_DIST && p->cols[2].aggr == 2 && !p->cols[2].e,
	   "hist column is the distribution of a2");
	query_free(q);

	q = compile("from f in kernel.function(\"vfs_read\") let n = f.arg(2) "
		    "where f.duration > 1ms select { n: n, t: f.time }", &p);
	ok(p && p->paired && p->entry.kind == PA_FENTRY && p->exit.kind == PA_FEXIT,
	   "kernel.function with duration: fentry + fexit");
	ok(p && p->nsaved == 2 && p->saved[1].kind == SAVE_ARG && p->saved[1].arg == 2,
	   "arg(2) is carried from entry to exit in slot 1");
	ok(p && p->lets[0].e->op == PX_SAVED && p->lets[0].e->idx == 1,
	   "the let reads slot 1 at exit");
	ok(p && p->cols[1].e->op == PX_SAVED && p->cols[1].e->idx == 0,
	   "time at exit is the entry time (slot 0)");
	ok(p && p->mode == PLAN_STREAM && p->record_size == 16, "stream record of 16 bytes");
	query_free(q);
}

static void test_eval(void)
{
	const struct plan *p;
	struct query *q;
	unsigned char key[64] = { 0 }, *value;
	struct plan_val v;
	int64_t pid = 42;

	q = compile("from s in syscall(\"write\") group s by { pid: s.pid, c: s.comm } into g "
		    "select { pid: g.pid, c: g.c, kb: g.sum(s.arg(2)) / 1024, avg: g.avg(s.arg(2)), "
		    "isbash: g.c == \"bash\" } order by kb desc", &p);
	ok(p != NULL, "group tuple query plans");
	if (!p) {
		query_free(q);
		return;
	}
	is_int(p->key_size, 24, "key: 8-byte pid + 16-byte comm");
	is_int(p->keys[1].offset, 8, "comm at offset 8");
	value = calloc(1, p->value_size);
	memcpy(key, &pid, 8);
	memcpy(key + 8, "bash", 4);
	for (int i = 0; i < 3; i++) {
		aggr_update(&p->aggrs[0].desc, value + p->aggrs[0].offset, 4096);
		aggr_update(&p->aggrs[1].desc, value + p->aggrs[1].offset, 1000 * (i + 1));
	}
	ok(!plan_eval(p, p->cols[0].e, key, value, &v) && v.i == 42, "pid column = 42");
	ok(!plan_eval(p, p->cols[1].e, key, value, &v) && v.type == VT_STR &&
	   v.len == 4 && !memcmp(v.s, "bash", 4), "comm column = bash");
	ok(!plan_eval(p, p->cols[2].e, key, value, &v) && v.i == 12, "kb = 12288 / 1024 = 12");
	ok(!plan_eval(p, p->cols[3].e, key, value, &v) && v.i == 2000, "avg = 2000");
	ok(!plan_eval(p, p->cols[4].e, key, value, &v) && v.i == 1, "comm == \"bash\" is 1");
	ok(p->order && !plan_eval(p, p->order, key, value, &v) && v.i == 12 && p->order_desc,
	   "order by kb desc evaluates to the kb column");
	is_int(plan_binop(PX_DIV, 7, 0), 0, "x / 0 = 0 (BPF)");
	is_int(plan_binop(PX_MOD, 7, 0), 7, "x %% 0 = x (BPF)");
	is_int(plan_binop(PX_DIV, INT64_MIN, -1), INT64_MIN, "INT64_MIN / -1 wraps");
	is_int(plan_binop(PX_SHR, -1, 60), 15, ">> is logical");
	is_int(plan_binop(PX_SHL, 1, 65), 2, "shift count mod 64");
	free(value);
	query_free(q);
}

static void test_hostile(void)
{
	static const char *const bad[] = {
		"from", "from x", "from x in", "from x in syscall(", "from x in syscall(\"",
		"from x in syscall(\"read\") select", "from x in syscall(\"read\") select {",
		"from x in syscall(\"read\") select { a: }", "\"\\x", "0x", "1.", "((((",
		"from x in process(99999999999999999999).function(\"a\") select count()",
		"from x in syscall(\"read\") select x.arg(-1)",
		"from x in syscall(\"read\") select x.arg(99999999999999999999)",
		"from x in syscall(\"read\") group x by x.pid into x select count()",
		"from x in syscall(\"read\") let x = 1 select x",
		"from x in syscall(\"read\") select str(str(x.arg(0)))",
		"from x in syscall(\"read\") select -x.comm",
		"from x in syscall(\"read\") select { a: 1 } order by a limit 1",
	};
	int crashes = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct plan *p;
		struct query *q = compile(bad[i], &p);

		if (!q || (!p && !query_error(q)))
			crashes++;
		query_free(q);
	}
	is_int(crashes, 0, "hostile inputs: every one planned or reported");

	/* random bytes, many times (ASan watches) */
	char buf[256];
	unsigned r = 12345;
	int unreported = 0;

	for (int i = 0; i < 3000; i++) {
		size_t n = (r = r * 1103515245 + 12345) % (sizeof(buf) - 1);
		const struct plan *p;
		struct query *q;

		for (size_t j = 0; j < n; j++)
			buf[j] = "from x in syscall(\"read\") where select group by into {}:.,()\"\\0123456789 +-*/<>=!&|#\n"[(r = r * 1103515245 + 12345) % 86];
		buf[n] = '\0';
		q = compile(buf, &p);
		if (q && !p && !query_error(q))
			unreported++;
		query_free(q);
	}
	is_int(unreported, 0, "3000 random queries: every failure has a message");
}

/* s.name: ids in keys and records become names on read (plan_names.c) */
static void test_names(void)
{
	const struct plan *p;
	struct query *q;
	unsigned char key[256];
	int64_t id, rd;
	char buf[32];

	q = compile("from s in syscall(\"*\") group s by { c: s.comm, n: s.name } into g "
		    "select { n: g.n, k: g.count() }", &p);
	ok(p && p->names && p->names->src == PN_CTX && p->names->ctx_off == 8,
	   "syscall(\"*\"): the id is raw_syscalls' number at ctx+8");
	if (p && p->names) {
		rd = plan_name_id(p, "read", 4);
		ok(rd >= 0 && !strcmp(plan_name_of(p, rd, buf, sizeof(buf)), "read"),
		   "read has an id and the id names read");
		is_int(plan_name_id(p, "rea", 3), -1, "a prefix names nothing");
		ok(p->nkeys == 2 && !p->keys[0].is_name && p->keys[1].is_name &&
		   p->keys[1].size == QUERY_STR_MAX, "only the name's key component is marked");
		memset(key, 0xee, sizeof(key));
		memset(key + p->keys[1].offset, 0, (size_t)p->keys[1].size);
		memcpy(key + p->keys[1].offset, &rd, sizeof(rd));
		plan_names_key(p, key);
		ok(!strcmp((char *)key + p->keys[1].offset, "read") &&
		   key[p->keys[1].offset + p->keys[1].size - 1] == 0 && key[0] == 0xee,
		   "plan_names_key: the id becomes \"read\", NUL padded, comm untouched");
		id = 1000000;
		memcpy(key + p->keys[1].offset, &id, sizeof(id));
		plan_names_key(p, key);
		is_str((char *)key + p->keys[1].offset, "syscall_1000000",
		       "an id without a name: syscall_N");
	}
	query_free(q);

	q = compile("from s in syscall(\"*\") where s.name == \"write\" select { c: s.name }", &p);
	ok(p && p->pred && p->pred->op == PX_EQ && p->pred->a->op == PX_FIELD &&
	   p->pred->a->type == VT_INT && p->pred->b->op == PX_CONST &&
	   p->pred->b->val == plan_name_id(p, "write", 5),
	   "where s.name == \"write\": an integer test of the id");
	ok(p && p->ncols == 1 && p->cols[0].is_name, "a streamed name column is marked");
	query_free(q);

	q = compile("from s in syscall(\"read\") group s by s.name into g select { n: g.key }", &p);
	ok(p && p->names && p->names->src == PN_CONST && p->names->n == 1 &&
	   !strcmp(p->names->name[0], "read"), "syscall(\"read\"): one name, id 0");
	query_free(q);

	q = compile("from s in spans(\"svc\") group s by s.name into g select { n: g.key }", &p);
	ok(p && !p->names, "spans(...): name is the span's, no name table");
	query_free(q);
}

int main(void)
{
	test_errors();
	test_names();
	test_pairing();
	test_eval();
	test_hostile();
	return test_done();
}
