// SPDX-License-Identifier: MIT
/*
 * Processes started after the attach (issue #25 item 2): a probe on a
 * library in every process ("libc:malloc" without a pid) is on each file
 * of that name mapped when it attached; a container started later maps
 * its own copy, which it must also be on.
 *
 * How new processes are seen: a BPF program on the sched:sched_process_exec
 * tracepoint writes the pid of each process that execs into a ring
 * buffer, which the driver polls with the query's other fds.  That is what
 * the mature BPF agents do (Tetragon, Parca's agent, Pixie): the event
 * fires in the new program's context, after its root and mount namespace
 * are final, in every pid and network namespace, with no set-up but the
 * BPF fay already loads.  The netlink proc connector was the other
 * choice: it needs CONFIG_PROC_EVENTS and CAP_NET_ADMIN, answers only in
 * the initial network namespace and drops events silently when its
 * socket buffer is full.
 *
 * The cost in the exec path is the program (tens of ns).  In fay, each pid
 * is checked against the views already seen (proc_root_id(): mount
 * namespace and root directory, two stat() calls): a process seeing
 * fay's own file system, or one already looked at, costs nothing more.
 * Only a new view resolves the library through /proc/PID/root and maybe
 * attaches (probe_follow_pid()).  At exec the loader has not mapped the
 * libraries yet: the name resolves in the process's own root (its
 * ld.so.cache), where its loader will find it.  Calls a process makes
 * before fay has attached (a few ms after its exec) are not counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "probe/procroot.h"

#define EXEC_RING_BYTES	(256 * 1024)	/* 16 bytes a record: 16384 pids */
#define EXEC_MAX_VIEWS	4096		/* views remembered (then each is looked at again) */

struct engine_exec {
	struct probe *tp;		/* sched:sched_process_exec */
	struct ir *ir;
	struct bprog *prog;
	struct bmap *ring;
	struct ring_buffer *rb;
	struct engine *e;
	struct proc_root_id *seen;	/* views looked at: fay's first */
	size_t nseen;
	uint64_t nexec, nviews, nfiles;
};

static bool seen_view(struct engine_exec *x, const struct proc_root_id *id)
{
	for (size_t i = 0; i < x->nseen; i++)
		if (!memcmp(&x->seen[i], id, sizeof(*id)))
			return true;
	if (x->nseen < EXEC_MAX_VIEWS)
		x->seen[x->nseen++] = *id;
	return false;
}

/* One process that exec'ed: every following probe, exit ones first (as
 * engine_attach(): no entry recorded without its exit). */
static int on_exec(void *ctx, void *data, size_t size)
{
	struct engine_exec *x = ctx;
	struct engine *e = x->e;
	struct proc_root_id id;
	char path[4096];
	uint64_t pid;

	if (size < sizeof(pid))
		return 0;
	memcpy(&pid, data, sizeof(pid));
	x->nexec++;
	if (proc_root_id((pid_t)pid, &id) || seen_view(x, &id))
		return 0;
	x->nviews++;
	for (int i = e->nprogs - 1; i >= 0; i--) {
		struct probe *p = e->progs[i].probe;
		int rc = p ? probe_follow_pid(p, (pid_t)pid, path, sizeof(path)) : 0;

		if (rc > 0) {
			x->nfiles++;
			pr_info("%s: one more file, %s (process %d, started after the attach): "
				"%zu files", e->progs[i].spec, path, (int)pid, probe_nfiles(p));
		} else if (rc < 0) {
			pr_warn("%s", probe_strerror(p));
		}
	}
	return 0;
}

void engine_exec_free(struct engine *e)
{
	struct engine_exec *x = e->exec;

	if (!x)
		return;
	if (x->nviews)
		pr_debug("exec watch: %llu execs, %llu new views of the file system, %llu files "
			 "added", (unsigned long long)x->nexec, (unsigned long long)x->nviews,
			 (unsigned long long)x->nfiles);
	for (int i = 0; i < e->nprogs; i++)
		if (e->progs[i].probe && probe_files_capped(e->progs[i].probe))
			pr_warn("%s: %zu files of the library left out: a probe is on at most %d",
				e->progs[i].spec, probe_files_capped(e->progs[i].probe),
				PROBE_MAX_FILES);
	ring_buffer__free(x->rb);
	probe_free(x->tp);
	bprog_free(x->prog);
	ir_free(x->ir);
	bmap_free(x->ring);
	free(x->seen);
	free(x);
	e->exec = NULL;
}

/* The program: the pid (tgid) of the task that exec'ed, into the ring. */
static int exec_prog(struct engine_exec *x)
{
	struct ir *ir = x->ir;
	ir_reg r = ir_vreg(ir);
	int slot = ir_stack_alloc(ir, 8, 8);

	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, r, IR_I(32));
	ir_store(ir, IR_S(slot), 0, 8, IR_R(r));
	ir_call(ir, IR_NOREG, BPF_FUNC_ringbuf_output, 4, IR_M(x->ring), IR_S(slot), IR_I(8),
		IR_I(0));
	ir_exit(ir, IR_I(0));
	return ir_error(ir);
}

int engine_exec_start(struct engine *e)
{
	struct probe_opts po = { .sz = sizeof(po) };
	struct bprog_opts o;
	struct bprog_diag d;
	struct engine_exec *x;
	struct proc_root_id self;
	char why[512];
	bool want = false;
	int err;

	for (int i = 0; i < e->nprogs; i++)
		want |= e->progs[i].probe && probe_follows_processes(e->progs[i].probe);
	if (!want || e->exec)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x || !(x->seen = calloc(EXEC_MAX_VIEWS, sizeof(*x->seen)))) {
		free(x);
		return -ENOMEM;
	}
	x->e = e;
	e->exec = x;
	if (!proc_root_id(0, &self))	/* fay's view: the files it resolved */
		x->seen[x->nseen++] = self;
	x->tp = probe_new(PROBE_TRACEPOINT, "sched:sched_process_exec", &po, why, sizeof(why));
	if (!x->tp) {
		err = errno ? -errno : -ENOENT;
		goto fail;
	}
	x->ring = bmap_new("fay_exec", BPF_MAP_TYPE_RINGBUF, 0, 0, EXEC_RING_BYTES);
	x->ir = x->ring ? ir_new("fay_exec") : NULL;
	if (!x->ir) {
		err = -ENOMEM;
		snprintf(why, sizeof(why), "out of memory");
		goto fail;
	}
	err = exec_prog(x);
	if (err) {
		snprintf(why, sizeof(why), "internal: the program: %s", errstr(err));
		goto fail;
	}
	probe_prog_opts(x->tp, &o);
	x->prog = bprog_load(x->ir, &o, &d);
	if (!x->prog) {
		err = d.err ? d.err : -EINVAL;
		snprintf(why, sizeof(why), "%s", d.msg);
		bprog_diag_clear(&d);
		goto fail;
	}
	err = probe_attach(x->tp, bprog_fd(x->prog));
	if (err) {
		snprintf(why, sizeof(why), "%s", probe_strerror(x->tp));
		goto fail;
	}
	x->rb = ring_buffer__new(bmap_fd(x->ring), on_exec, x, NULL);
	if (!x->rb) {
		err = -errno;
		snprintf(why, sizeof(why), "cannot map the ring buffer: %s", errstr(err));
		goto fail;
	}
	return 0;
fail:
	pr_warn("processes started from now on are not looked at for new files of the "
		"library (a container's own copy): watching execs: %s", why);
	engine_exec_free(e);
	return err;
}

int engine_exec_fd(const struct engine *e)
{
	return e->exec && e->exec->rb ? ring_buffer__epoll_fd(e->exec->rb) : -1;
}

int engine_exec_consume(struct engine *e)
{
	return e->exec && e->exec->rb ? ring_buffer__consume(e->exec->rb) : 0;
}
