/* SPDX-License-Identifier: MIT */
/*
 * The FayQL engine: lowers a struct plan (query/plan.h) to eBPF programs
 * (bpf/ir.h), loads and attaches them (probe/probe.h), and reads the
 * results back: per-CPU partial aggregates merged with aggr_merge() and
 * turned into rows with plan_eval(), or streamed records.
 *
 *	struct engine *e = engine_new(q, plan, &opts);      code generation
 *	engine_dump_ir(e, f) / engine_dump_bpf(e, f)        --emit=ir|bpf
 *	engine_load(e); engine_attach(e);                   into the kernel
 *	engine_poll(e, ms) (streams) / engine_read(e, &res) (aggregates)
 *	engine_free(e);                                     detach, free
 *
 * BPF objects, per query:
 *   vals      PERCPU_HASH key_size -> value_size (PERCPU_ARRAY of one
 *             entry when the query has no key): the partial aggregates;
 *   zero      ARRAY of one value_size entry of zeroes: the initial value
 *             of a new key (values may be far larger than the 512-byte
 *             BPF stack);
 *   pairs     HASH u32 tid -> entry record (paired sources; inline:
 *             PERCPU_ARRAY of INLINE_DEPTH records, one per call level);
 *   out       RINGBUF (or PERF_EVENT_ARRAY on kernels without it): rows
 *             of streaming queries;
 *   counters  PERCPU_ARRAY of ENGINE_NCOUNTERS u64: what was dropped.
 *
 * Errors: functions return -errno and leave a message in engine_error()
 * (one or more lines, ending in '\n'); a verifier rejection is reported
 * at the query's line:col through query_errorf() (query_error(q)).
 * Nothing here prints.
 */
#ifndef FAY_ENGINE_ENGINE_H
#define FAY_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "query/plan.h"
#include "query/query.h"

/* What the programs count when they must drop something. */
enum engine_counter {
	EC_MAP_FULL,		/* an event whose key did not fit in vals */
	EC_PAIRS_FULL,		/* an entry not recorded: pairs was full */
	EC_LOST,		/* a streamed row the output buffer had no room for */
	EC_READ_FAIL,		/* a str() whose address could not be read ("" kept) */
	EC_DEPTH,		/* inline: a call nested deeper than INLINE_DEPTH
				 * probed calls (not paired: not timed) */
	EC_UNWOUND,		/* inline, fay before f.unwound: a call left
				 * without its return, not timed.  No longer
				 * counted (each is an exit event, f.unwound);
				 * kept: the counters go by index on the wire
				 * (an older agent's count is still named) */
	ENGINE_NCOUNTERS
};

enum engine_buffer { ENGINE_BUF_AUTO, ENGINE_BUF_RINGBUF, ENGINE_BUF_PERF };

/* How function(...) sources run (fay query --probe-mode): auto: inline
 * in the one process they name when its fay runtime (libfay-probe.so,
 * fay run) is loaded, or can be loaded with ptrace (inject_lib set, no
 * no_inject, inject_check() allows it), and its patcher takes the
 * function, else a uprobe; inline: inline or fail with the reason;
 * uprobe: always a uprobe. */
enum engine_probe_mode { ENGINE_PROBE_AUTO, ENGINE_PROBE_INLINE, ENGINE_PROBE_UPROBE };

struct engine_opts {
	size_t sz;		/* sizeof(struct engine_opts) */
	pid_t pid;		/* > 0: only events of this process (tgid) */
	bool no_fentry;		/* kernel functions: kprobes only */
	enum engine_buffer buffer;	/* streaming output */
	/* Do not resolve probes that need the system (tracepoints never
	 * do; kernel functions and USDT always do): for --emit. */
	bool emit_only;
	/* The value of the host field (fay agent --host); NULL or "":
	 * gethostname().  Cut to QUERY_STR_MAX bytes. */
	const char *host;
	/* Kernel memory the maps may take when they are created (0:
	 * ENGINE_MAX_PREALLOC); a query over it is refused with the sizes. */
	uint64_t max_prealloc;
	enum engine_probe_mode probe_mode;
	/* inline: wait this long for the process's runtime to open its
	 * socket (a process fay run just started) */
	int inline_wait_ms;
	/* Probe only the processes of user 'uid' (a non-root requester,
	 * engine_opts_requester()): every program drops the events of
	 * other real uids; uprobes and USDT probes on one process are
	 * refused unless the process is uid's; process-wide ones unless
	 * the binary is uid's (run.c, owner.c). */
	bool own_uid_only;
	uid_t uid;
	/* inline mode, a process without the runtime: load this library
	 * (libfay-probe.so) into it with ptrace (probe/inject.h); NULL: never
	 * (auto mode then falls back to a uprobe) */
	const char *inject_lib;
	/* The runtime to load with ptrace into the processes of a command
	 * fay started (hold_execs) at their execs, in inline mode
	 * (engine_inl_kid()): its descendants, and its own process when it
	 * enters another root or drops the preload; NULL: none (the
	 * command's own runtime is preloaded: a host path other roots lack,
	 * an environment a runtime may clear) */
	const char *kid_lib;
	/* Never load a library into a process (fay query --no-inject):
	 * auto mode falls back to a uprobe saying so, inline fails */
	bool no_inject;
	/* Only tasks in this cgroup v2 (a path under the cgroup2 root) and
	 * the cgroups below it, from every source but spans(...); an inline
	 * query's process must be in it (fay agent --cgroup, fay query
	 * --cgroup; engine/scope.c).  NULL or "": every task. */
	const char *cgroup;
	/* Where libfay processes keep their shm files, for trace_id and
	 * span_name of profile(...) samples (spancur.c; fay agent
	 * --shm-dir).  NULL or "": $FAY_SHM_DIR, else /dev/shm. */
	const char *shm_dir;
	/* pid is a command fay started (fay query -c, fay run): while the
	 * exec watch follows it into another root (a chroot, a container:
	 * execwatch.c), it is stopped at each exec and executable mmap()
	 * (SIGSTOP sent by the BPF program) until fay has looked at its new
	 * files, and continued (SIGCONT) then: its first calls are counted.
	 * Never for a process fay did not start. */
	bool hold_execs;
};
#define engine_opts__last_field hold_execs
#define ENGINE_MAX_PREALLOC (256ull << 20)

struct engine;

/*
 * Who asks (#10): the requester is the real uid of this process (fay
 * query: the user who runs it; fay collector's /api/query and fay
 * agent's cluster queries: the user the daemon runs as, since an HTTP
 * client has no uid).  Sets o->own_uid_only when that uid is not 0 and
 * allow_other_users (--allow-other-users) is false, and o->uid.
 */
void engine_opts_requester(struct engine_opts *o, bool allow_other_users);

/*
 * Generate the programs for plan p of query q (both must outlive the
 * engine).  Resolves the probe points that code generation depends on
 * (kernel functions: fentry or kprobe; USDT argument specs; uprobes).
 * Returns NULL with errno set; when err is given, a message is written
 * there (errlen bytes).  A problem in the query itself is reported
 * through query_errorf() (query_error(q) non-NULL, errno EINVAL).
 */
struct engine *engine_new(struct query *q, const struct plan *p,
			  const struct engine_opts *opts, char *err, size_t errlen);
/* Detach, close every program and map, free.  Accepts NULL. */
void engine_free(struct engine *e);
/* The last error message (lines ending in '\n'), "" if none. */
const char *engine_error(const struct engine *e);

/* The IR of each program, and the maps: stable (golden tests). */
int engine_dump_ir(struct engine *e, FILE *f);
/* The lowered bytecode of each program (bpftool "xlated" syntax). */
int engine_dump_bpf(struct engine *e, FILE *f);

/* Resolve the remaining probes, create the maps and load the programs.
 * -EPERM: privileges (message says so); -EINVAL with query_error(q) set:
 * the verifier rejected code of the query at a line:col. */
int engine_load(struct engine *e);
/* Attach every program (exit before entry).  0 or -errno. */
int engine_attach(struct engine *e);
/* Undo engine_attach(); safe to call twice. */
void engine_detach(struct engine *e);
/* Whether e's probes run inline in a traced process (fay's runtime), whose
 * maps must be read after detaching (a read while they run can see a value
 * half updated); kernel probes' maps are read while attached. */
bool engine_runs_inline(const struct engine *e);
/* How the function(...) source runs and why, one line without '\n'
 * ("pid 123: inline (handle: push rbp)", "pid 123: uprobe: the fay
 * runtime is not loaded (start it with fay run)"); "" for other sources. */
const char *engine_note(const struct engine *e);
/* Number of kernel attachments and a description of each probe. */
int engine_nprobes(const struct engine *e);
const char *engine_probe_desc(const struct engine *e, int i);
/* The kernel's id of program i once loaded (bpftool prog show id N), or 0. */
uint32_t engine_prog_id(const struct engine *e, int i);

/* ---- results ---------------------------------------------------------- */

/* One aggregated row: key (key_size bytes) and the merged value. */
struct engine_row {
	unsigned char *key;
	unsigned char *val;
};

struct engine_result {
	size_t nrows;
	struct engine_row *rows;	/* ordered and limited as the query says */
	uint64_t counters[ENGINE_NCOUNTERS];
	struct engine_cats *cats;	/* 'categorize': the categories; else NULL */
};

/* ---- categorize (categorize.c) ---------------------------------------- */

#define CAT_TOP	3	/* distinguishing features shown per category */

/*
 * The categories of a result's entities (a query's 'categorize ENTITY by
 * ... into K'): entity[i] (sorted by name) is in category label[i]
 * (1..k) and was in prev[i] in the previous window (0: not there);
 * category l (1..k) has size[l-1] entities, its centroid at
 * centroid[(l-1) * nfeat] (shares of each feature in the pivot form,
 * z-scores in the vector form) and its distinguishing features
 * top[(l-1) * CAT_TOP + t] (indices into feat, -1: none).
 */
struct engine_cats {
	int k;			/* given, or chosen (into auto) */
	bool k_auto;		/* into auto: k chosen by silhouette */
	double silhouette;	/* into auto: the chosen k's (0 for k = 1) */
	bool pivot;
	int entity_col;		/* the select column of the entities */
	size_t n, nfeat;
	char **entity, **feat;
	int *label, *prev;
	size_t *size;
	double *centroid;
	int *top;
};

/*
 * Categorize res's entities as plan p's 'categorize' says (nothing
 * without one): res->cats is set.  *prev is the previous window's
 * answer (NULL at first), used to keep category numbers and to tell who
 * changed; it is replaced by this one's.  Call before
 * engine_result_order() (a limit must not hide entities).  0 or -ENOMEM.
 */
int engine_result_categorize(const struct plan *p, struct engine_result *res,
			     struct engine_cats **prev);
/* The category (1..k) of row r's entity, or 0. */
int engine_cats_label(const struct engine_cats *c, const struct plan *p,
		      const struct engine_row *r);
/* Free c (accepts NULL). */
void engine_cats_free(struct engine_cats *c);
/* The categories as one JSON object's members, without the braces:
 * "entity_column":N,"pivot":B,"categories":[{"category":1,"size":2,"members":[...],"centroid":
 * {"feat":v,...},"top":[...]}],"changed":[{"entity":E,"from":1,"to":2}] */
void engine_print_cats_json(const struct engine_cats *c, FILE *f);

/*
 * Read every key of vals, merge the per-CPU partials and order/limit the
 * rows.  reset: delete what was read (tumbling windows).  The counters
 * are the totals since the load (or the previous reset).  Free the
 * result with engine_result_clear().  0 or -errno.
 */
int engine_read(struct engine *e, bool reset, struct engine_result *res);
/* The same; raw: rows in no particular order and not limited (partial
 * aggregates that are merged elsewhere before engine_result_order()). */
int engine_read_rows(struct engine *e, bool reset, bool raw,
		     struct engine_result *res);
/* Order res's rows as plan p says ('order by', else by key) and keep the
 * first 'limit' (result.c).  0 or -ENOMEM (res unchanged). */
int engine_result_order(const struct plan *p, struct engine_result *res);
void engine_result_clear(struct engine_result *res);

/* Streaming: fn is called with each record (record_size bytes). */
typedef void (*engine_record_fn)(void *ctx, const void *rec, size_t size);
int engine_set_record_fn(struct engine *e, engine_record_fn fn, void *ctx);
/* An fd that becomes readable when records wait (epoll), or -1. */
int engine_stream_fd(const struct engine *e);
/* Deliver the waiting records without blocking; count or -errno. */
int engine_consume(struct engine *e);
/* An fd that becomes readable when processes exec'ed and a probe on a
 * library in every process may have new files to probe (containers
 * started after the attach: execwatch.c), or -1 (no such probe). */
int engine_exec_fd(const struct engine *e);
/* Look at the processes that exec'ed, attaching to their new files,
 * without blocking; how many, or -errno. */
int engine_exec_consume(struct engine *e);
/* Sum of the drop counters over every CPU (also the user-side losses of
 * a perf buffer). */
int engine_counters(struct engine *e, uint64_t out[ENGINE_NCOUNTERS]);

/*
 * spans(...) queries (plan entry PA_SPANS) load no BPF: engine_load()
 * builds the programs in fay's in-process VM and engine_attach() opens
 * the engine to feeds.  Then, from any thread, engine_span_feed() runs
 * the program on one span's context (query/spanctx.h: plan ctx_size
 * bytes, spanctx_fill()); it serialises with the reader.  A feeder calls
 * engine_span_kick() after a run of feeds, so that a streaming query's
 * stream fd wakes once per run and not per span.  -EINVAL when e is not a
 * spans engine or not attached.
 */
int engine_span_feed(struct engine *e, void *ctx);
void engine_span_kick(struct engine *e);

/* "events dropped: the map of keys was full" ... */
const char *engine_counter_desc(enum engine_counter c);

/* ---- output ----------------------------------------------------------- */

struct engine_out {
	FILE *f;
	bool json;
	bool folded;		/* aggregates: folded stacks (a stack key
				 * column and a number per row) */
	bool tree;		/* aggregates: those stacks as a call tree */
	bool header_done;	/* streaming table: header printed */
};

/* Can p's result be printed folded (or as a tree)?  0, or -EINVAL with
 * the reason. */
int engine_folded_check(const struct plan *p, char *why, size_t len);

/* Print an aggregated result of plan p: a table (histograms as bars) or
 * one JSON object per row; window_start_ns > 0 tags each row (and the
 * table).  0 or -EIO/-ENOMEM. */
int engine_print_result(const struct plan *p, struct engine_out *o,
			const struct engine_result *res, uint64_t window_start_ns);
/* Print one streamed record. */
int engine_print_record(const struct plan *p, struct engine_out *o,
			const void *rec);
/* The columns of one aggregated row (key, val) or of one streamed record
 * (key NULL, val the record) as a JSON array in column order: integers,
 * strings, distributions as arrays of {"lo","hi","count"} (the --json
 * forms).  No newline.  0 or -EIO/-ENOMEM. */
int engine_print_values(const struct plan *p, FILE *f, const void *key,
			const void *val);
/* Warnings for non-zero counters, one line each, to f; returns how many. */
int engine_print_counters(const uint64_t c[ENGINE_NCOUNTERS], FILE *f,
			  const struct plan *p);

const struct plan *engine_plan(const struct engine *e);

/* Stack keys (stacks.c): read the mappings of the processes that the
 * user stacks of the keys so far came from, while they run (each once;
 * cheap when none is new).  Whether the plan has user stack keys (the
 * driver calls it every ENGINE_STACK_TICK_MS then). */
#define ENGINE_STACK_TICK_MS	50
bool engine_stacks_tick(struct engine *e);
/* A query reading trace_id or span_name of profile(...) samples: look
 * for new libfay processes (at once when engine_spancur_fd() is readable:
 * a file renamed into the directory) and forget gone ones (every 250
 * ms), for the probe to find their threads' current spans (docs/ABI.md
 * 1.6).  Returns whether the query needs it (then the driver calls it
 * every ENGINE_STACK_TICK_MS, when engine_spancur_fd() is readable and
 * at engine_spancur_wake()). */
bool engine_spancur_tick(struct engine *e);
/* The inotify fd on the libfay files' directory (readable: a new file),
 * or -1 (none yet: the first engine_spancur_tick() makes it). */
int engine_spancur_fd(const struct engine *e);
/* When (clock_monotonic_ns()) engine_spancur_tick() wants to run next:
 * soon after a file that is not live yet was seen; UINT64_MAX: none. */
uint64_t engine_spancur_wake(const struct engine *e);

#endif
