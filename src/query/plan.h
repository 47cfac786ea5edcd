/* SPDX-License-Identifier: MIT */
/*
 * FayQL query plan: what the eBPF back end lowers, and what the reader
 * side (agent, CLI) needs to turn per-CPU map values into rows.
 *
 * Fay's idea: push work to where the data is.  A plan splits a checked
 * query into
 *
 *   probe     entry (and, when ret or duration is used, exit) programs:
 *             entry_pred, the saved entry record, lets, pred, the group key
 *             and the per-event update of every aggregate;
 *   per CPU   one PERCPU_HASH value per key (PERCPU_ARRAY of one entry
 *             when there is no key): the aggregates' partial states laid
 *             out at plan_aggr.offset (layouts in aggr.h);
 *   host      read every CPU's value and aggr_merge() them (any order),
 *             then compute the columns with plan_eval();
 *   cluster   (later) merge host partials the same way; only order by,
 *             limit and final values run at the root.
 *
 * Programs.  An unpaired source (tracepoint, usdt, profile, or a pairable
 * source whose query uses neither ret nor duration) has one program at
 * 'entry'; it is the *main* program.  A paired source has two:
 *
 *   entry:  if (entry_pred) { rec = { saved[0..nsaved) }; pairs[tid] = rec }
 *   exit:   rec = pairs[tid]; if none: return; delete pairs[tid];
 *           main body with PX_SAVED reading rec
 *
 * 'pairs' is a HASH map keyed by the thread id (u32) with values of
 * saved_size bytes: slot i is the 8-byte word at 8*i; slot 0 is always
 * the entry time (bpf_ktime_get_ns()).
 *
 * Main body, in this order:
 *   1. lets[0..nlets): compute each (lets may use earlier lets);
 *   2. if (pred && !pred) return;
 *   3. STREAM mode: fill a record of record_size bytes (cols[i] at
 *      cols[i].offset, integers as 8 bytes, strings NUL padded) and emit
 *      it (ring buffer / perf buffer);
 *      AGGREGATE mode: build the key (keys[i] at keys[i].offset, key_size
 *      bytes, zero padded), look up or insert a zeroed value of
 *      value_size bytes, and for every aggregate apply the per-event
 *      update of aggr.h to value + aggrs[i].offset with the value of
 *      aggrs[i].arg (count: no argument).  distinct over a string hashes
 *      its bytes (aggr_hash_bytes over the string's full size).
 *
 * Expressions are 64-bit signed integers or fixed-size strings.
 * Arithmetic wraps; / and % are signed with BPF's rules (x / 0 = 0,
 * x % 0 = x); >> is a logical shift and shift counts are taken mod 64;
 * comparisons are signed; && || ! give 0 or 1 (no short-circuit is
 * needed: reads have no side effects).
 *
 * Everything here lives in the query's arena: freed by query_free().
 */
#ifndef FAY_QUERY_PLAN_H
#define FAY_QUERY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "query/aggr.h"
#include "query/query.h"

/* Size limits the planner enforces. */
#define PLAN_KEY_MAX		256	/* group key bytes (built on the BPF stack) */
#define PLAN_VALUE_MAX		32768	/* per-CPU value bytes (PCPU_MIN_UNIT_SIZE) */
#define PLAN_RECORD_MAX		4096	/* streamed record bytes */
#define PLAN_MAX_SAVED		8	/* entry record slots (time + args) */
#define PLAN_MAX_ENTRIES	10240	/* default number of keys per map */

enum plan_attach_kind {
	PA_NONE,
	PA_TRACEPOINT,		/* .sys .event */
	PA_FENTRY,		/* .func; the back end may fall back to kprobe */
	PA_FEXIT,		/* .func; fallback kretprobe */
	PA_UPROBE,		/* .binary .symbol .pid */
	PA_URETPROBE,		/* .binary .symbol .pid */
	PA_USDT,		/* .binary .provider .name */
	PA_PERF_SAMPLE,		/* .hz, every CPU */
	PA_SPANS,		/* no probe: the agent runs the program in its
				 * VM for each span it drains (query/spanctx.h) */
};

struct plan_attach {
	enum plan_attach_kind kind;
	const char *sys, *event;	/* PA_TRACEPOINT */
	const char *func;		/* PA_FENTRY, PA_FEXIT */
	/* PA_UPROBE, PA_URETPROBE: binary is a path or a library name
	 * ("libc"), NULL for process(PID).function("sym") (the process's
	 * own executable); pid 0 means every process. */
	const char *binary, *symbol;
	const char *provider, *name;	/* PA_USDT (+ .binary) */
	int pid;
	unsigned hz;			/* PA_PERF_SAMPLE */
	/* Syscall tracepoints: arg(n) is the 8-byte word at record offset
	 * args_off + 8 * n, ret the one at ret_off; -1 when not a syscall
	 * tracepoint (then args come from registers: pt_regs / fentry ctx
	 * / USDT argument specs). */
	int args_off, ret_off;
	bool user;			/* probed code runs in user space */
};

enum px_op {
	PX_CONST,	/* .val */
	PX_STR,		/* .str .len: a literal; only as the b of STREQ/STRNE */
	PX_FIELD,	/* .field read where the expression runs:
			 * F_TIME bpf_ktime_get_ns(), F_PID tgid, F_TID pid,
			 * F_COMM bpf_get_current_comm() (16 bytes), F_CPU
			 * smp id, F_UID current uid, F_RET return value (exit
			 * program), F_DURATION now - saved slot 0 (exit),
			 * F_HOST the host name (a string of QUERY_STR_MAX
			 * bytes, constant for the query: the back end
			 * resolves it when it generates code and stores
			 * its bytes, no helper call) */
	PX_ARG,		/* .idx: argument n at the attach point (entry) */
	PX_SAVED,	/* .idx: slot of the per-thread entry record (exit) */
	PX_TPFIELD,	/* .tpf: tracepoint record field (offset, size, signedness;
			 * char[N] strings; __data_loc strings) */
	PX_LET,		/* .idx: value of lets[idx] */
	PX_STRREAD,	/* .a: address; reads a NUL-terminated string of at most
			 * .size bytes, from user memory when .user */
	PX_NEG, PX_NOT, PX_BNOT,			/* .a */
	PX_ADD, PX_SUB, PX_MUL, PX_DIV, PX_MOD,		/* .a .b */
	PX_AND, PX_OR, PX_XOR, PX_SHL, PX_SHR,
	PX_EQ, PX_NE, PX_LT, PX_LE, PX_GT, PX_GE, PX_LAND, PX_LOR,
	PX_STREQ, PX_STRNE,	/* .a a string value, .b a PX_STR; compares
				 * .b->len + 1 bytes (the literal and its NUL) */
	/* read side only (columns, order by): */
	PX_KEY,		/* .idx: key component */
	PX_AGG,		/* .idx: final value of aggrs[idx] (aggr_final) */
	PX_NOPS
};

struct pexpr {
	enum px_op op;
	enum vtype type;	/* VT_INT or VT_STR */
	int size;		/* VT_STR: bytes */
	int64_t val;
	const char *str;
	size_t len;
	int idx;
	enum field_id field;
	const struct tp_field *tpf;
	bool user;		/* PX_STRREAD: user memory */
	bool either;		/* PX_STRREAD: kernel memory, else user memory */
	struct pexpr *a, *b;
	struct loc loc;		/* in the query text, for diagnostics */
};

enum plan_saved_kind { SAVE_TIME, SAVE_ARG };

struct plan_saved {
	enum plan_saved_kind kind;
	int arg;		/* SAVE_ARG: argument index */
};

struct plan_let {
	const char *name;
	struct pexpr *e;
};

/*
 * Stacks (s.kstack, s.ustack(N)): a group key only.  The probe builds its
 * key with the stack's id (the hash of its frames, which the probe keeps
 * in a map under it: src/engine/codegen_stack.c) and, for a user
 * stack, the process id (bpf_size 16: id, tgid); the reader looks the
 * frames up, names them (kernel symbols, each process's ELF symbols) and
 * puts the folded string, root first, "main;a;b", in the key's
 * QUERY_STACK_STR bytes before it merges keys or ships partials.  So the
 * key the probe builds (bpf_key_size, bpf_offset) differs from the key
 * everything else reads (key_size, offset) only where stacks are.
 */
enum plan_stack { PSTACK_NONE, PSTACK_KERNEL, PSTACK_USER };

struct plan_key {
	const char *name;	/* tuple name, or the key's source text */
	struct pexpr *e;
	int offset, size;	/* in the key; integers 8 bytes */
	bool is_name;		/* the probe's name: the probe stores its id
				 * (plan_names_key() puts the name there) */
	enum field_id cg;	/* F_CGROUP or F_CONTAINER: the probe stores
				 * the cgroup id, plan_names_key() its path or
				 * container; else F_TIME (0) */
	enum plan_stack stack;	/* a stack (see "Stacks" below) */
	int depth;		/* PSTACK_*: innermost frames kept */
	int bpf_offset, bpf_size;	/* in the key the probe builds */
};

struct plan_aggr {
	struct aggr_desc desc;	/* kind, parameters, state size */
	struct pexpr *arg;	/* NULL for count */
	int offset;		/* in the per-CPU value, 8-byte aligned */
	const char *text;	/* as written, e.g. "g.sum(f.ret)" */
	/* -1, or the aggregate whose state this one reads (a quantile of
	 * the same expression: one sketch, another p); such an aggregate
	 * has no update of its own and is not merged again */
	int share;
};

struct plan_col {
	const char *name;
	enum vtype type;	/* VT_INT, VT_STR or VT_DIST */
	int size;		/* VT_STR bytes */
	struct pexpr *e;	/* NULL for a distribution column */
	int aggr;		/* VT_DIST: the hist/lhist aggregate; else -1 */
	int offset;		/* STREAM: in the record */
	bool is_name;		/* STREAM: the probe's name, as is_name of a key */
	enum field_id cg;	/* STREAM: as cg of a key */
	int stack_key;		/* AGGREGATE: the stack key this column
				 * shows (its index), or -1 */
};

/*
 * The probe's name (s.name): the probe never copies a string per event.
 * It reads an id, where src says, and keeps it as the first 8 bytes of
 * the name's string slot (the rest zero), so keys and records built in
 * the kernel group by the id; the reader replaces each such component by
 * name[id] (plan_names_key(), plan_names_record()) before it merges keys
 * or ships partials, so hosts and collectors only ever see names.  A
 * comparison with a literal (s.name == "read") is planned as one of the
 * ids: an integer comparison in the probe.
 */
enum plan_name_src {
	PN_CONST,		/* one probe point: id 0 */
	PN_CTX,			/* the 8-byte word at context offset ctx_off
				 * (raw_syscalls:sys_enter/sys_exit: the
				 * system call's number) */
	PN_COOKIE,		/* the attachment's BPF cookie: a wildcard's
				 * index among the functions or events it
				 * matched; a tracepoint's names are known when
				 * planned (from tracefs), a function's once the
				 * probe resolved (query_plan_set_names()) */
};

struct plan_names {
	enum plan_name_src src;
	int ctx_off;
	int n;			/* ids 0..n-1 */
	const char **name;	/* name[id]; NULL: no name ("syscall_ID") */
	const char *what;	/* "system call", "function", "event" ... */
	const char *how;	/* where the ids come from, for --plan */
};

enum plan_mode { PLAN_STREAM, PLAN_AGGREGATE };

struct plan {
	const struct ast_query *ast;
	enum src_kind source;
	const char *target;		/* the source's string, e.g. "libc:read" */

	struct plan_attach entry;	/* always set */
	struct plan_attach exit;	/* kind PA_NONE when unpaired */
	bool paired;
	int nsaved;
	struct plan_saved saved[PLAN_MAX_SAVED];
	int saved_size;			/* bytes of the entry record */

	struct pexpr *entry_pred;	/* paired: checked at entry; NULL: true */
	struct pexpr *pred;		/* main program; NULL: true */
	int nlets;
	struct plan_let *lets;

	enum plan_mode mode;
	int nkeys;
	struct plan_key *keys;
	int key_size;			/* 0: no key (one PERCPU_ARRAY slot) */
	int bpf_key_size;		/* the probe's key (stacks: see above) */
	int stack_depth;		/* 0: no stack key; else the most
					 * frames a stack key keeps */
	int naggrs;
	struct plan_aggr *aggrs;
	int value_size;
	int max_entries;		/* keys per map */

	int ncols;
	struct plan_col *cols;
	int record_size;		/* STREAM */

	uint64_t window_ns;		/* 0: one result at the end */
	uint64_t for_ns;		/* 0: until interrupted */
	uint64_t keep_ns;		/* STREAM 'keep DUR': each host keeps its
					 * events of the last DUR instead of sending
					 * them (engine/keepbuf.h); 0: none */
	uint64_t keep_max;		/* 'keep DUR max N': at most N events (0:
					 * the memory bound alone) */
	struct pexpr *order;		/* NULL: key order */
	bool order_desc;
	uint64_t limit;			/* 0: no limit (rows, per window) */
	const struct ast_categorize *cat;	/* NULL: no categorize */

	/* spans(...): the context the program reads (query/spanctx.h):
	 * ctx_size bytes, the fixed fields and one slot per tag key */
	int ntags;
	const char *const *tags;
	int ctx_size;			/* 0 for other sources */

	/* s.name: NULL when the query does not use it */
	const struct plan_names *names;
	/* s.cgroup or s.container is a key or a column: ids to name */
	bool cgroups;
};

/*
 * Plan a checked query (query_parse + query_check first; query_plan runs
 * them when needed).  *out stays valid until query_free().  Returns 0,
 * -EINVAL with query_error() set (e.g. cluster queries, sizes), -ENOMEM.
 */
int query_plan(struct query *q, const struct plan **out);

/* Text dump (stable; golden tests diff it) and JSON. */
int plan_dump(const struct plan *p, FILE *f);
int plan_dump_json(const struct plan *p, FILE *f);
/* One expression, infix, as the text dump writes it. */
void pexpr_print(const struct plan *p, const struct pexpr *e, FILE *f);

/* A column value at read time. */
struct plan_val {
	enum vtype type;
	int64_t i;
	const char *s;		/* VT_STR: points into the key; not NUL
				 * terminated past .len */
	size_t len;
};

/*
 * Evaluate a read-side expression (PX_CONST, PX_KEY, PX_AGG, operators)
 * for one row: key is key_size bytes, value the merged value_size bytes.
 * Returns 0, or -EINVAL for an expression the read side cannot compute.
 */
int plan_eval(const struct plan *p, const struct pexpr *e, const void *key,
	      const void *value, struct plan_val *out);

/*
 * Names (plan_names.c).  The name of id (never NULL: "syscall_ID" for an
 * id without one; buf holds it then).  The id of name, or -1.
 */
const char *plan_name_of(const struct plan *p, int64_t id, char *buf, size_t len);
int64_t plan_name_id(const struct plan *p, const char *name, size_t len);
/* Replace the id in every is_name component of key (key_size bytes) /
 * of a streamed record (record_size bytes) by its name, NUL padded, and
 * the cgroup id of every cg component by its path or container
 * (common/cgroup.h; "cgroup_ID" once it is gone; a path longer than the
 * slot keeps its end, "..." first).  Call them when p->names or
 * p->cgroups. */
void plan_names_key(const struct plan *p, void *key);
void plan_names_record(const struct plan *p, void *rec);

/*
 * PN_COOKIE: the names of ids 0..n-1 (copied), given by whoever resolved
 * the probe.  0, -EINVAL (no such table, or names already set) or -ENOMEM.
 */
int query_plan_set_names(struct query *q, const char *const *names, int n);

/*
 * The unit of column col's integers: "ns" for a time span (a duration, or
 * an aggregate of durations that keeps the unit: sum, min, max, avg,
 * quantile), else NULL (a count, a number of no known unit, a string).
 * Charts put columns of one unit on one axis and print "ns" as times.
 */
const char *plan_col_unit(const struct plan *p, int col);

/* The integer operators with the plan's semantics (BPF's). */
int64_t plan_binop(enum px_op op, int64_t a, int64_t b);

#endif
