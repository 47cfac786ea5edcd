/* SPDX-License-Identifier: MIT */
/*
 * FayQL front end: one internal header for src/query.
 *
 * A query goes through passes chained on one error variable (ply's
 * compile.c habit):
 *
 *	err = query_parse(q);          lexer + recursive-descent parser -> AST
 *	err = err ? : query_check(q);  names, types, aggregates, options
 *	err = err ? : query_plan(q, &plan);   see plan.h
 *
 * Every node, string and plan object lives in the query's arena and is
 * freed by query_free() in one call.  The first error stops the passes;
 * query_error() gives it formatted like a compiler diagnostic:
 *
 *	<source>:LINE:COL: error: MESSAGE
 *	<the source line>
 *	     ^
 *
 * Nothing here prints on its own (libraries never print); the dump
 * functions write to the FILE the caller gives.
 */
#ifndef FAY_QUERY_QUERY_H
#define FAY_QUERY_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "query/aggr.h"

/* Bytes kept of a string: comm (the kernel's TASK_COMM_LEN), str(e). */
#define QUERY_COMM_LEN	16
#define QUERY_STR_MAX	64
/* A stack (s.kstack, s.ustack) as a group key: its frames' names, root
 * first, ';' between them ("main;a;b"), at most this many bytes; the
 * frames kept (innermost first) by default and at most. */
#define QUERY_STACK_STR		2048
#define QUERY_STACK_DEPTH	64
#define QUERY_STACK_DEPTH_MAX	127
/* Tag keys one spans(...) query may name (sp.tag("KEY")). */
#define QUERY_MAX_TAGS	16

/* ---- arena ---------------------------------------------------------- */

struct arena;

/* A new, empty arena; NULL and errno on failure.  Free with arena_free(). */
struct arena *arena_new(void);
/* Free the arena and everything allocated from it.  Accepts NULL. */
void arena_free(struct arena *a);
/* size zeroed bytes, aligned for any type; NULL (errno ENOMEM) on failure. */
void *arena_alloc(struct arena *a, size_t size);
/* A NUL-terminated copy of len bytes of s; NULL on failure. */
char *arena_strndup(struct arena *a, const char *s, size_t len);
/* printf into the arena; NULL on failure. */
__attribute__((format(printf, 2, 3)))
char *arena_printf(struct arena *a, const char *fmt, ...);

/* ---- source positions ----------------------------------------------- */

/*
 * 1-based line and column (bytes) of the caret, its byte offset off, and
 * the byte span [start, end) of the whole token or node in the text.
 */
struct loc {
	int line, col;
	int off;
	int start, end;
};

/* ---- lexer ---------------------------------------------------------- */

enum tok_kind {
	T_EOF = 0,
	T_IDENT, T_INT, T_FLOAT, T_STRING, T_DURATION,
	/* keywords: T_FROM .. T_CATEGORIZE, contiguous (after a dot they are names) */
	T_FROM, T_IN, T_WHERE, T_LET, T_GROUP, T_BY, T_INTO, T_SELECT,
	T_WINDOW, T_FOR, T_ORDER, T_DESC, T_ASC, T_LIMIT, T_CATEGORIZE,
	/* punctuation */
	T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_COMMA, T_DOT, T_COLON,
	T_ASSIGN,
	T_PLUS, T_MINUS, T_STAR, T_SLASH, T_PERCENT,
	T_AMP, T_PIPE, T_CARET, T_TILDE, T_SHL, T_SHR,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE,
	T_ANDAND, T_OROR, T_BANG,
	T_NTOKENS
};

struct token {
	enum tok_kind kind;
	struct loc loc;
	const char *text;	/* T_IDENT: name; T_STRING: unescaped bytes */
	size_t len;		/* T_STRING: byte length (may hold NULs) */
	uint64_t ival;		/* T_INT value; T_DURATION value in ns */
	double fval;		/* T_FLOAT (only quantile's p uses one) */
};

/* "'select'", "identifier", "end of query" ... for messages. */
const char *tok_describe(enum tok_kind k);

/* ---- AST ------------------------------------------------------------ */

enum node_kind {
	N_INT,		/* .ival; .is_dur when written as a duration */
	N_FLOAT,	/* .fval: a fraction, only for quantile(e, p) */
	N_STR,		/* .str, .len */
	N_IDENT,	/* .name: a let, the range variable, 'now' */
	N_MEMBER,	/* .a . .name: io.pid, g.key, tp.prev_pid */
	N_CALL,		/* [.a .] .name ( .args ): count(), g.sum(e), io.arg(2), str(e) */
	N_UNARY,	/* .op .a */
	N_BINARY,	/* .a .op .b */
};

/* What sema found a node to mean (AST dump shows it). */
enum sem_kind {
	S_NONE,
	S_FIELD,	/* built-in event field: .field */
	S_ARG,		/* io.arg(n): .ival = n */
	S_TPFIELD,	/* tracepoint format field: .tpf */
	S_LET,		/* reference to let number .idx */
	S_STRREAD,	/* str(e) */
	S_KEY,		/* g.key / g.NAME: key component .idx */
	S_AGGR,		/* aggregate number .idx */
	S_NOW,		/* 'now' (only in the time-limit form) */
	S_COL,		/* order by NAME: select column .idx */
	S_TAG,		/* sp.tag("KEY") of spans(...): tag key .idx (ast_query.tags) */
};

/* Built-in event fields. */
enum field_id {
	F_TIME, F_PID, F_TID, F_COMM, F_CPU, F_UID, F_RET, F_DURATION, F_HOST,
	/* spans(...) */
	F_NAME, F_SERVICE, F_TRACE_ID, F_SPAN_ID, F_PARENT_ID, F_KIND, F_ERROR,
	/* the high 64 bits of a span's trace id (a capture rule's row, #22) */
	F_TRACE_HI,
	/* function(...) in inline mode: the libfay span current on the thread */
	F_SPAN_NAME,
	/* the probe's name (s.name of a kernel or user source): a string to
	 * the query, an id in the probe that the plan's name table turns
	 * into the name when keys and records are read (plan.h) */
	F_PROBE,
	/* the process's pid in its own pid namespace (a container's) */
	F_VPID,
	/* its cgroup v2 path, and the container that path names (strings to
	 * the query; the cgroup id in the probe, named when read: plan.h) */
	F_CGROUP, F_CONTAINER,
	/* s.kstack, s.ustack, s.ustack(N): the kernel's / user stack, a
	 * group key only (the probe keeps a stack id; plan.h "Stacks") */
	F_KSTACK, F_USTACK,
	/* function(...): 1 at the exit of a call left without its return
	 * (longjmp, an exception unwinding through it; inline probes) */
	F_UNWOUND,
	F_NFIELDS
};
const char *field_name(enum field_id f);

/* Value types: 64-bit signed integers and fixed-size strings. */
enum vtype {
	VT_NONE,
	VT_INT,		/* 64-bit signed integer */
	VT_STR,		/* string of .strsize bytes (NUL padded) */
	VT_DIST,	/* hist()/lhist(): a distribution, a column on its own */
};

/* A tracepoint format field (/sys/kernel/tracing/events/S/E/format). */
struct tp_field {
	const char *name;
	const char *ctype;	/* as written: "pid_t", "char[16]", "__data_loc char[]" */
	int offset, size;
	bool is_signed;
	bool is_string;		/* char[N] (inline) or __data_loc char[] */
	bool data_loc;		/* u32 at offset: (len << 16) | record offset */
	bool is_array;		/* non-char array: not usable in queries */
};

struct tp_format {
	const char *sys, *event;
	int id;
	int nfields;
	struct tp_field *fields;
};

struct node {
	enum node_kind kind;
	struct loc loc;
	const char *name;
	const char *str;
	size_t len;
	uint64_t ival;
	double fval;
	bool is_dur;
	enum tok_kind op;
	struct node *a, *b;
	struct node **args;
	int nargs;
	int height;		/* levels in this subtree (parser-bounded) */

	/* filled by sema */
	enum vtype type;
	int strsize;		/* VT_STR: bytes of storage */
	enum sem_kind sem;
	enum field_id field;
	const struct tp_field *tpf;
	int idx;
	bool needs_exit;	/* uses ret or duration (directly or via a let) */
	bool has_aggr;		/* contains an aggregate */
	bool per_event;		/* reads the event outside any aggregate */
};

/* Source kinds. */
enum src_kind {
	SRC_SYSCALL, SRC_TRACEPOINT, SRC_KFUNC, SRC_UFUNC, SRC_PFUNC, SRC_USDT,
	SRC_SPANS, SRC_PROFILE,
};
enum scope_kind { SCOPE_LOCAL, SCOPE_CLUSTER, SCOPE_HOST };

struct ast_source {
	struct loc loc;		/* the probe word */
	enum scope_kind scope;
	struct loc scope_loc;
	const char *scope_host;	/* host("h") */
	enum src_kind kind;
	const char *arg;	/* the STRING argument; NULL for spans without one */
	struct loc arg_loc;
	int64_t num;		/* process(N) pid, profile(N) Hz */
	struct loc num_loc;
	/* split forms of arg, filled by sema */
	const char *part[3];
	const struct tp_format *tp;
	/* a tracepoint wildcard: the events it matched, as s.name spells
	 * them (name[i] is the BPF cookie i's), sorted */
	const char **names;
	int nnames;
};

enum clause_kind { C_WHERE, C_LET };

struct ast_clause {
	enum clause_kind kind;
	struct loc loc;
	const char *name;	/* let */
	struct loc name_loc;
	struct node *e;
	bool time_limit;	/* where X.time < now + D: became 'for D' */
};

/* One named item of a tuple ({ name: expr, ... }), or a lone expression. */
struct ast_item {
	const char *name;	/* for a lone expression: its source text */
	struct loc name_loc;
	struct node *e;
	bool named;
};

struct ast_group {
	struct loc loc;
	const char *var;	/* group VAR by */
	struct loc var_loc;
	bool tuple;
	int nkeys;
	struct ast_item *keys;
	const char *into;
	struct loc into_loc;
};

enum opt_kind { O_WINDOW, O_FOR, O_ORDER, O_LIMIT, O_CATEGORIZE, O_KEEP };

#define QUERY_CAT_MAX_FEATURES	16	/* categorize E by F1, ..., F16 */
#define QUERY_CAT_MAX_K		32
#define QUERY_CAT_AUTO_MAX_K	8	/* into auto: k from 1 to this */

/* categorize ENTITY by FEATURE [using VALUE] into K, or
 * categorize ENTITY by COL, COL, ... into K (select column names) */
struct ast_categorize {
	const char *entity;
	struct loc entity_loc;
	int nfeat;
	const char *feat[QUERY_CAT_MAX_FEATURES];
	struct loc feat_loc[QUERY_CAT_MAX_FEATURES];
	const char *value;		/* 'using VALUE'; NULL: none given */
	struct loc value_loc;
	int k;				/* 0: into auto */
	struct loc k_loc;
	/* filled by sema: select column indices */
	int entity_col, value_col;	/* value_col -1: vector form */
	int feat_col[QUERY_CAT_MAX_FEATURES];
	bool pivot;			/* one key column's values are the features */
};

/* keep DUR max N: the most events a host keeps for one query. */
#define QUERY_KEEP_EVENTS_MAX	10000000u

struct ast_option {
	enum opt_kind kind;
	struct loc loc;
	uint64_t val;		/* ns for window/for/keep; rows for limit */
	uint64_t max;		/* keep ... max N: events (0: not given) */
	struct node *e;		/* order by */
	bool desc;
	struct ast_categorize *cat;	/* categorize */
};

struct ast_query {
	struct loc loc;
	const char *var;
	struct loc var_loc;
	struct ast_source src;
	int nclauses;
	struct ast_clause *clauses;
	struct ast_group *group;	/* NULL without a group */
	struct loc select_loc;
	bool sel_tuple;
	int ncols;
	struct ast_item *cols;
	int nopts;
	struct ast_option *opts;

	/* filled by sema */
	int naggrs;
	struct node **aggrs;	/* aggregate calls in select then order */
	struct aggr_desc *adesc;	/* one per aggregate */
	int nlets;
	struct ast_clause **lets;	/* the let clauses, in order */
	uint64_t for_ns;	/* 0: none; from 'for' or the time-limit form */
	struct loc for_loc;
	uint64_t window_ns;
	uint64_t keep_ns;	/* 'keep DUR': events kept, not sent (0: none) */
	uint64_t keep_max;	/* 'keep DUR max N' (0: not given) */
	struct node *order;
	bool order_desc;
	uint64_t limit;		/* 0: none */
	bool has_limit;
	const struct ast_categorize *cat;	/* NULL: no categorize */
	bool aggregating;	/* any aggregate, or a group */
	bool needs_exit;
	/* spans(...): the tag keys sp.tag("KEY") names, in order */
	int ntags;
	const char *tags[QUERY_MAX_TAGS];
};

/* ---- queries ------------------------------------------------------- */

struct query;

struct query_opts {
	size_t sz;		/* sizeof(struct query_opts) */
	/* Directory holding events/<sys>/<event>/format; NULL: find or
	 * mount tracefs (/sys/kernel/tracing, /sys/kernel/debug/tracing). */
	const char *tracefs;
	/* Planned as part of a cluster query (by an agent, which runs it as
	 * a local query, or by a collector, which merges its partials):
	 * cluster. and host("...") scopes are accepted.  Otherwise they are
	 * refused at plan time with a pointer to fay query --cluster. */
	bool cluster;
};

/*
 * A query over len bytes of text (copied), named source in diagnostics
 * ("<query>", a file name).  opts may be NULL.  NULL and errno on
 * failure.  Free with query_free().
 */
struct query *query_new(const char *source, const char *text, size_t len,
			const struct query_opts *opts);
/* Free the query, its AST, its plan and its messages.  Accepts NULL. */
void query_free(struct query *q);

/* Lex and parse; 0 or -EINVAL (see query_error()) or -ENOMEM. */
int query_parse(struct query *q);
/* Check names, types, aggregates and options; needs query_parse(). */
int query_check(struct query *q);

/* The checked AST; NULL before query_parse() succeeded. */
const struct ast_query *query_ast(const struct query *q);
/* The formatted first error (several lines, ends in '\n'), or NULL. */
const char *query_error(const struct query *q);
/* Line and column of the first error (0 when it has no position). */
void query_error_pos(const struct query *q, int *line, int *col);
/* The message alone (no position, no source line), or NULL. */
const char *query_error_msg(const struct query *q);

/* One node per line, two spaces of indent per level, positions. */
int query_dump_ast(const struct query *q, FILE *f);
int query_dump_ast_json(const struct query *q, FILE *f);

/* ---- inside src/query ---------------------------------------------- */

/* Record the first error at loc (NULL: no position); returns -EINVAL. */
__attribute__((format(printf, 3, 4)))
int query_errorf(struct query *q, const struct loc *loc, const char *fmt, ...);
struct arena *query_arena(struct query *q);
const char *query_text(const struct query *q);
const char *query_tracefs_opt(const struct query *q);

/* The lexer: tokenises the whole text into an arena array. */
int lex_all(struct query *q, const char *text, size_t len,
	    struct token **toks, int *ntoks);

/* Tracepoint formats (tracefs.c). */
int tp_format_load(struct query *q, const char *sys, const char *event,
		   const struct loc *loc, const struct tp_format **out);
const struct tp_field *tp_field_find(const struct tp_format *f, const char *name);
/* A tracepoint wildcard (SYS and EVENT globs) into src: src->names (each
 * event, "event" or, when the subsystem is a glob, "sys:event") and
 * src->tp, a format holding the fields every matched event has at the
 * same offset, size, type and sign.  0, or -EINVAL with the error at
 * loc: nothing matches, more than TRACEFS_GLOB_MAX events match. */
int tp_glob_load(struct query *q, struct ast_source *src, const struct loc *loc);
/* Whether syscall NAME has tracepoints, when tracefs is already there:
 * 1 yes, 0 no, -1 cannot tell (nothing is mounted for this). */
int tp_syscall_known(struct query *q, const char *name);

/* Strings shared by the dumps. */
const char *op_str(enum tok_kind op);
const char *src_kind_name(enum src_kind k);
/* s as a C string literal with escapes. */
void dump_cstr(FILE *f, const char *s, size_t len);
/* ns as the largest exact unit: 5m, 1500ms, 7ns. */
void dump_dur(FILE *f, uint64_t ns);

/* Evaluate a constant integer expression (literals, + - * / % etc.). */
bool node_const(const struct node *n, int64_t *out);

#endif
