/* SPDX-License-Identifier: MIT */
/*
 * Inside the engine: shared by codegen*.c (plan -> IR), run.c (set-up,
 * dumps, tear-down), run_load.c (load, attach, stream), run_read.c
 * (counters, aggregates) and output.c (tables, JSON).
 */
#ifndef FAY_ENGINE_ENGINE_INT_H
#define FAY_ENGINE_ENGINE_INT_H

#include "bpf/ir.h"
#include "bpf/load.h"
#include "bpf/rbuf.h"
#include "engine/engine.h"
#include "engine/ustack_map.h"
#include "probe/probe.h"
#include "probe/stacksym.h"

/* Bytes of the streaming ring buffer (perf: pages per CPU). */
#define ENGINE_RINGBUF_SIZE	(2u << 20)
#define ENGINE_PERF_PAGES	64
/* A streamed row is built on the BPF stack before it is copied out. */
#define ENGINE_RECORD_MAX	320

enum eprog_role { EP_ENTRY, EP_EXIT };

struct eprog {
	enum eprog_role role;
	bool is_main;			/* runs the query's body */
	const struct plan_attach *at;
	enum probe_kind kind;
	char spec[4200];
	struct probe_opts popts;
	struct probe *probe;		/* NULL until resolved */
	/* --emit of a kernel function this kernel cannot probe: the code
	 * is generated for fentry/fexit with the BTF argument count */
	int assume_fentry_nargs;	/* -1: not assumed */
	char why_not[512];
	struct ir *ir;
	struct bprog *prog;
};

struct engine {
	struct query *q;
	const struct plan *p;
	struct engine_opts opts;
	bool use_ringbuf;

	struct bmap *vals, *zero, *pairs, *out, *counters;
	/* Inline probes: pairs is a per-slot (per-thread) array of one
	 * record, the saved values then a "set" word, instead of a hash
	 * keyed by the thread id (no lock, no hashing: engine_inl_pairs()). */
	bool slot_pairs;
	/* Uprobes: pairs is an LRU hash keyed by the thread id and the
	 * call's frame (S, the address of its return address: the entry's
	 * sp, the uretprobe's sp - 8), so every call of a recursion pairs
	 * with its own entry, and a record a longjmp or an exception left
	 * behind (the kernel drops that call's uretprobe) never pairs with
	 * another call's exit; the LRU ages such records out. */
	bool frame_pairs;
	/* Windowed aggregates: vals keys end in an 8-byte window epoch the
	 * probe reads from the epoch map (ARRAY of one u64).  At a window's
	 * end the reader moves the epoch on, then reads and deletes every
	 * key of an older epoch: no event is lost between a read and a
	 * delete; a probe that read the old epoch just before the move lands
	 * in the next read (run_read.c). */
	struct bmap *epoch;
	bool epochs;
	/* Stack keys (plan.h "Stacks"): the BPF stack map the probes put
	 * stacks in, and the names of their frames (stacks.c) */
	/* the stack keys' stacks (codegen_stack.c): by id (their hash),
	 * and the per-CPU scratch a probe puts one in; fay's VM: its stack
	 * map (stacks) */
	struct bmap *stacks, *stk, *stkscr;
	struct stacksym *ssym;
	/* User stacks walked by unwind tables (codegen_ustack.c, a uprobe
	 * or a profile sample of opts.pid or its followed descendants):
	 * tgid -> its table (ustack_map.h); NULL: the kernel's walk only */
	struct bmap *unwind;
	/* the processes with a table in e->unwind (pid 0: a free slot;
	 * opts.pid's is the first) and the maps each was made from */
	struct {
		pid_t pid;
		uint64_t sig;
	} ustk_procs[USTK_PROCS];
	/* trace_id / span_name of profile(...) samples: the libfay
	 * processes' current-span cells, tgid -> where (spancur.c) */
	struct bmap *spancur;
	struct engine_spancur *spancur_st;
	/* 'categorize': the previous window's categories (categorize.c) */
	struct engine_cats *cat_prev;
	uint64_t cur_epoch;
	struct eprog progs[2];
	int nprogs;

	/* engine_opts.cgroup resolved (scope.c): the scope's cgroup id,
	 * level and canonical path; scope_id 0: no scope */
	uint64_t scope_id;
	int scope_level;
	char scope_path[4096];

	bool loaded, attached;
	char err[2048];
	/* The host field: gethostname() (as the agent reports it), NUL
	 * padded; QUERY_STR_MAX bytes are stored, so a name of exactly
	 * that length has no NUL. */
	char host[QUERY_STR_MAX + 1];

	/* streaming */
	struct brbuf *out_rd;		/* e->out's reader (ring or perf buffers) */
	engine_record_fn rec_fn;
	void *rec_ctx;
	uint64_t user_lost;		/* perf buffer: lost samples */
	uint64_t counters_base[ENGINE_NCOUNTERS];	/* after a reset */

	/* spans(...): the programs run in fay's VM, fed by the caller
	 * (spans.c); NULL for kernel sources */
	struct engine_vm *vm;
	/* function(...) as inline probes in one process (inline_run.c) */
	struct engine_inl *inl;
	char note[1024];
	uint64_t inl_injected_us;	/* this query loaded the runtime with ptrace: how long */
	int inl_hold;		/* fd + 1 of a runtime session kept open until the
				 * uprobe replacing it is attached, or 0 */
	bool inl_refused;	/* auto: the runtime refused the attach (the
				 * session kept open: engine_inl_fallback()) */	/* processes that exec after the attach, for probes on a library
	 * in every process (execwatch.c); NULL: none watched */
	struct engine_exec *exec;
	/* a command fay started (opts.hold_execs): its pid and its
	 * descendants' (by fork, in the kernel: execwatch.c), the pids the
	 * programs count; NULL until engine_follow_map() */
	struct bmap *follow;
};

/* ---- processes started after the attach (execwatch.c) ----------------- */

/* When a probe follows processes (probe_follows_processes()), or a
 * program walks a command's stacks by its unwind table: watch execs,
 * each new view of the file system handed to every such probe
 * (probe_follow_pid()), the command's table made anew while it is held
 * (engine_ustack_update()).  0, or -errno with a warning logged (the query
 * runs on without). */
int engine_exec_start(struct engine *e);
/* Stop watching and free (accepts an engine without a watch). */
void engine_exec_free(struct engine *e);
/* For a command fay started (opts.hold_execs, opts.pid, not inline):
 * the BPF hash map (u32 pid -> u8) of it and its descendants, which the
 * exec watch fills at each fork of one of them; made at the first call,
 * with opts.pid in it.  NULL for other queries, or out of memory. */
struct bmap *engine_follow_map(struct engine *e);

/* Set e->err (printf) and return err. */
int engine_fail(struct engine *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Resolve prog's probe (probe_new); 0 or -errno with e->err set. */
int engine_resolve(struct engine *e, struct eprog *ep);
/* run.c: what ep probes, for --emit's titles and messages ("spans", the
 * probe's own description once resolved, "fentry (assumed)", else the
 * kind); a static string or one ep's probe owns. */
const char *engine_ep_title(const struct eprog *ep);
/* Emit every program's IR; 0 or -errno (message in e->err, or a query
 * error through query_errorf()). */
int engine_codegen(struct engine *e);

/* ---- stacks as text (output_stacks.c) ---------------------------------- */

/* res's rows as folded stacks ("main;a;b 42" a line: the other key
 * columns as outermost frames, the first integer aggregate): 0, -EINVAL
 * (engine_folded_check() refuses p) or -EIO. */
int engine_print_folded(const struct plan *p, FILE *f, const struct engine_result *res);
/* The same stacks merged into a call tree from their roots, a frame a
 * line with its inclusive number and share of the total, children by
 * number: 0, -EINVAL, -ENOMEM or -EIO. */
int engine_print_tree(const struct plan *p, FILE *f, const struct engine_result *res);

/* ---- stack keys (stacks.c) ------------------------------------------- */

/* Distinct stacks fay_stk (the VM's stack map) holds (a query's life). */
#define ENGINE_STACK_ENTRIES	8192
/* set in a stack key's id (codegen_stack.c): the stack's hash, the key of
 * its frames in fay_stk (bit 63 clear: a negative id is an errno) */
#define ENGINE_STACK_ID_BIT	(1ll << 62)

/* Process pid's unwind table into e->unwind, when a program walks by it
 * and pid is opts.pid or one of the descendants a command fay started
 * (the follow map; else nothing), made anew when its executable
 * mappings changed since the last (unwind_process_sig()): after the
 * programs are loaded, at each exec and executable mmap() of a command
 * fay started or of its descendants (execwatch.c, while it is held),
 * and on the stack tick for each process with a table (dlopen(); calls
 * between the mmap() and the tick walk the new object's frames by frame
 * pointers).  At most USTK_PROCS processes at once: a descendant's slot
 * is freed (its table deleted) once it has left the follow map (its
 * exit); past them, frame pointers.  A table fay cannot build or that
 * exceeds the map's bound leaves the process to frame pointers, said at
 * info level.  Never fails the query. */
void engine_ustack_update(struct engine *e, pid_t pid);

/* The BPF stack map of a plan with stack keys (none without); 0 or
 * -errno. */
int engine_stacks_map(struct engine *e);
/* The reader's key from the probe's: every component copied to its
 * place, each stack's id (and process) looked up and folded into names
 * (stacksym.h).  ukey holds key_size bytes. */
void engine_stacks_key(struct engine *e, unsigned char *ukey, const unsigned char *bkey);

/* ---- the libfay span of a profile sample (spancur.c) ------------------ */

/* Free the map and the reader's list of processes. */
void engine_spancur_free(struct engine *e);
/* Emit: the size-byte (1, 2, 4 or 8) kernel value at p + off into r,
 * through k (an 8-byte stack slot); 0 when the read fails
 * (bpf_probe_read_kernel()).  Also execwatch.c's. */
void engine_read_kernel(struct ir *ir, ir_reg r, ir_reg p, int off, int size, int k);

/* ---- spans(...) in the VM (spans.c) ----------------------------------- */

/* Whether e's plan runs in the VM (a spans(...) source) and not in the kernel. */
bool engine_is_vm(const struct engine *e);
/* owner.c: a non-root requester's probes (engine_opts.own_uid_only).
 * engine_check_pid(): ep's one process (popts.pid > 0) is the requester's,
 * checked before anything reads it (name: the function or probe as the
 * query names it); engine_check_owners(): once resolved, the binary of
 * every process-wide uprobe/USDT probe is.  0 (also when not
 * restricted), or -EPERM/-ESRCH with e->err set. */
int engine_check_pid(struct engine *e, const struct eprog *ep, const char *name);
int engine_check_owners(struct engine *e);

/* engine_opts.cgroup (scope.c): resolve the scope into e->scope_*, and
 * for an inline query check that its process is in it.  0, or the
 * engine_fail() code (no such cgroup, the process outside it). */
int engine_scope(struct engine *e);
/* Build the programs and maps in the VM; 0 or -errno with e->err set. */
int engine_vm_load(struct engine *e);
/* Free what engine_vm_load() made; accepts an engine without it. */
void engine_vm_free(struct engine *e);
/* The reader's lock: held around a whole read (run_read.c). */
void engine_vm_lock(struct engine *e);
void engine_vm_unlock(struct engine *e);
/* The bmap_* calls of the reader, on b's VM map: a per-slot value is
 * slots * stride bytes, as bmap_lookup() gives a per-CPU one.  0 or
 * -errno (-ENOENT: no such key). */
int engine_vm_lookup(const struct engine *e, const struct bmap *b, const void *key,
		     void *buf, size_t stride);
int engine_vm_next_key(const struct engine *e, const struct bmap *b, const void *prev,
		       void *next);
int engine_vm_update(const struct engine *e, const struct bmap *b, const void *key,
		     const void *buf, size_t stride);
int engine_vm_delete(const struct engine *e, const struct bmap *b, const void *key);
int engine_vm_sum_u64(const struct engine *e, const struct bmap *b, const void *key,
		      uint64_t *out);
/* The reader's "CPUs": the maps' slots, or inline the slots threads have
 * taken so far (vm_map_slots_used()), a snapshot engine_vm_lookup() and
 * engine_vm_update() then read and write (its buffers are that long). */
int engine_vm_ncpus(const struct engine *e);
/* engine_stream_fd() and engine_consume() of a VM engine. */
int engine_vm_stream_fd(const struct engine *e);
int engine_vm_consume(struct engine *e);

/* ---- function(...) as inline probes (inline_run.c) --------------------- */

struct engine_inline;
/* After the probes are resolved: inline or uprobe (e->note says which);
 * 0, or -errno (--probe-mode=inline and it cannot) with e->err set. */
int engine_inl_decide(struct engine *e);
bool engine_inl_active(const struct engine *e);
/* Inline: the entry records in the calling thread's slot (e->slot_pairs),
 * a per-slot array instead of the kernel's hash by thread id; a thread
 * keeps its slot from its first probe to its exit, so the records pair
 * the same calls.  0 or -errno. */
int engine_inl_pairs(struct engine *e);
/* Inline: the process the probe runs in, as fay numbers it (inner false:
 * the host's pid, what uprobes see) or as its own pid namespace does
 * (inner true: what its getpid() says).  Constants of the program: the
 * runtime runs in that one process (a forked child's is inert). */
pid_t engine_inl_pid(const struct engine *e, bool inner);
/* "inline /path/bin:sym@0x... (pid N)" */
const char *engine_inl_desc(const struct engine *e);
/* Send the maps and programs of in, arm the site.  0 or -errno (e->err). */
int engine_inl_attach(struct engine *e, const struct engine_inline *in);
/* fay run follows the command's execs (the runtime of each image it
 * execs is preloaded and holds its main(); docs/QUERY.md): the session's
 * fd, whose hangup (POLLHUP, POLLIN: end of file) is the exec or the
 * exit, or -1 (no session to watch). */
int engine_inl_fd(const struct engine *e);
/* s.ustack on inline probes: when the process's executable mappings
 * changed since its unwind table was sent (an object dlopen()ed), send
 * it a new one (the runtime keeps RT_UNWIND_TABLES a session; the last
 * refused ends it).  Called on the stack tick (engine_stacks_tick()). */
void engine_inl_unwind_tick(struct engine *e);
/* The session hung up: closed, and the process followed from now on
 * (engine_inl_follow()) for up to engine_opts.inline_wait_ms. */
void engine_inl_hangup(struct engine *e);
/* Whether engine_inl_follow() has an image to look for (the driver
 * calls it every ENGINE_INL_FOLLOW_MS meanwhile). */
#define ENGINE_INL_FOLLOW_MS	5
bool engine_inl_following(const struct engine *e);
/* One attempt, without waiting: connect to the runtime of the image the
 * process exec()ed and arm the site there with the same maps (the
 * counts go on), or let an image that maps no site run on; stops when
 * the process has exited, and after inline_wait_ms without a runtime
 * (e->note then says so, as it does when the image refuses the site:
 * true then, once). */
bool engine_inl_follow(struct engine *e);
/*
 * A process of the command fay started, held by the exec watch at its
 * exec: a descendant in whatever root, or the command's own process
 * when its new image sees another root than fay (a container, a chroot)
 * or has lost its LD_PRELOAD of the runtime (env -i): when the probe's
 * BIN resolves there (probe_child_file()), the runtime is loaded at its
 * entry point (inject_library_at_entry(); a preloaded one is the same
 * object) and armed with the query's maps, its threads writing a window
 * of their slots of its own (KID_WINDOW slots from KID_BASE), before its
 * main() runs; the command's first session is then no longer followed.
 * 1 when armed (an info line says so: "inline in N processes"; its hold
 * has ended), 0 when it is none of the query's, -errno when it could
 * not be (warned; it runs on untraced).  Inline mode of a command fay
 * started only.
 */
int engine_inl_kid(struct engine *e, pid_t pid);
/* Restore the site (nothing if not armed) in the process and every
 * descendant's image armed; close the sessions. */
void engine_inl_detach(struct engine *e);
void engine_inl_free(struct engine *e);
/* Close the runtime session an auto fallback kept open (the runtime
 * then lets a held program run): once its uprobe is attached, or failed. */
void engine_inl_release(struct engine *e);
/* Auto mode, after engine_inl_attach() failed because the runtime
 * refused (ARM could not write the jump: no room for a trampoline, a
 * thread that could not be moved...): the session's socket, which still
 * holds a program fay run started, handed to the caller, and into note
 * (len bytes) the line saying the function takes a uprobe and why.  The
 * caller builds the query again with --probe-mode=uprobe and gives both
 * to engine_inl_adopt().  -1 when the failure was anything else. */
int engine_inl_fallback(struct engine *e, char *note, size_t len);
/* e (uprobe mode) keeps fd open until its uprobe is attached
 * (engine_inl_release()), and says note (engine_note()). */
void engine_inl_adopt(struct engine *e, int fd, const char *note);
/* The VM maps of an engine (spans.c), for engine_inl_attach(). */
const struct engine_inline *engine_vm_inline(const struct engine *e);

#endif
