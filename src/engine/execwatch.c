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
 *
 * Files mapped later, or from elsewhere than the root's library
 * directories (dlopen("/opt/app/lib/libfoo.so"), LD_LIBRARY_PATH, a
 * host process's private copy): two more programs on the
 * syscalls:sys_enter_mmap / sys_exit_mmap tracepoints.  The entry keeps
 * the thread of an mmap() of a file (fd >= 0) with PROT_EXEC in a hash
 * map, with its length; the exit of such a call, when it succeeded,
 * writes the pid, the address and the length into the same ring (24
 * bytes: an exec's record is 8).  The
 * loader maps each library's code so, once; anonymous and data mappings
 * (the bulk of mmap() calls) cost the entry program's two compares and
 * the exit program's hash lookup.  fay
 * reads that mapping's /proc/PID/map_files link and attaches when the
 * file answers to the library's name and is none of the probe's
 * (probe_follow_mapping(): a file probed already, a host process's libc,
 * costs a readlink() and a stat()).  The calls made between the mmap() and the
 * attach (a dlopen()ed library's constructors) are not counted.  A file
 * looked at with nothing more to do (probed already, another name) goes
 * into a hash map of (s_dev, inode) that the entry program checks, the
 * file read from the task's file table (probe_file_offsets()): a host
 * process's libc wakes fay once, not once a process.
 *
 * A probe on one process (-p, -c: its pid) follows that process alone
 * (the programs compare the pid): when it execs into another root (a
 * chroot, a new mount namespace) its new files are probed for that pid.
 * A command fay started (engine_opts.hold_execs) is stopped by the
 * program itself at each exec and executable mmap() it reports
 * (bpf_send_signal(SIGSTOP), queued before the record is written and
 * taken before its next user instruction) and
 * continued by on_exec() once its files are probed: no call missed.
 *
 * Such a command's descendants are its too (`-c 'unshare -f -p chroot
 * ROOT prog'`, `systemd-nspawn -D ROOT prog`, `podman run IMAGE prog`):
 * the program that is counted is a descendant, often in a new pid
 * namespace, and for podman not even a child of fay's child (conmon,
 * which starts the runtime, daemonizes; the container's process is
 * conmon's runtime's child).  Parentage changes; ancestry by fork does
 * not: a program on sched:sched_process_fork puts each child of a
 * followed process into the follow map (engine_follow_map(), what the
 * query's programs count: -c means the command and every process it
 * forks, as `strace -f` or `perf record` do), one on
 * sched:sched_process_exit takes threads out again, and a process once
 * its last thread is gone (its pid may be a stranger's next: never
 * followed, held nor probed then; tests/integration/query_pid_reuse.sh).
 * The exec and mmap
 * programs report and hold every followed process, and on_exec()
 * attaches a uprobe on that process alone to the file it sees
 * (probe_follow_child()): the kernel's filter of a uprobe on a pid is on
 * that process's memory, so a fork, which has its own, needs its own.  A
 * descendant is held and probed at its execs only: a forked child that
 * never execs (a server's worker) is not counted.  Holding it on its way
 * back from fork() (syscalls:sys_exit_clone... run in the new task) was
 * tried and dropped: a daemon that forks and exits at once (conmon)
 * leaves its child stopped in an orphaned process group, which the
 * kernel sends SIGHUP, and the child dies (podman run failed 2 runs of
 * 4).
 *
 * In every process (no pid), the first calls of a container fay did not
 * start: its libc is a file no probe is on until fay has looked at its
 * mapping, and the loader runs main() in well under the time that takes
 * (a few ms on a loaded host: 3 rounds of 20 missed 16 to 3699 calls).
 * So the mmap() exit program also holds the process it reports when that
 * process is in another mount namespace than the host's (the kernel
 * threads', with fay in the host's pid namespace; task->nsproxy->mnt_ns,
 * probe_mntns_offsets()): SIGSTOP from the program (queued before the
 * record is written, so fay's SIGCONT can only come after it), the pid
 * in the held map, the record flagged (bit 32 of its pid word); on_exec()
 * probes the file and continues it.  Only a file none looked at yet is
 * reported (the known map), so a container is stopped once for each new
 * executable file it maps (its libc, its libgcc_s, ...), for the time of
 * one look (about a millisecond), and the host's own processes (of the
 * initial mount namespace, whatever fay's own is) never.  If fay dies meanwhile, a guard process
 * (guard_start(): a grandchild of fay waiting on a pipe only fay writes)
 * sees the pipe close and continues every pid of the held map (and, for
 * a command fay started, of the follow map: a descendant held at an exec
 * when fay died; fay writes a byte before it closes the pipe when it is
 * done, so that a normal end continues no one but the held).  The
 * limits: a process stopped and continued can be seen so by its parent
 * (SIGCHLD with CLD_STOPPED/CLD_CONTINUED, waitpid(WUNTRACED)) and by
 * its tracer; a SIGCONT handler runs; a chroot without a new mount
 * namespace is not held (it is seen at exec, as before); past
 * MMAP_KNOWN files each unknown mapping is held again.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "probe/procroot.h"

#define EXEC_RING_BYTES	(256 * 1024)	/* 16 bytes a record: 16384 pids */
#define EXEC_MAX_VIEWS	4096		/* views remembered (then each is looked at again) */
#define MMAP_PENDING	4096		/* threads inside an executable file mmap() */
#define MMAP_REC	24		/* pid, address, length */
#define MMAP_KNOWN	4096		/* files looked at, not reported again */
#define PROC_PID_INIT_INO 0xEFFFFFFCU	/* the initial pid namespace's inode (linux/proc_ns.h) */
#define FOLLOW_MAX	16384		/* a command's processes and live threads */
#define HELD_MAX	4096		/* processes stopped at an mmap() record */
#define HELD_BIT	(1ull << 32)	/* in a record's pid word: it is held */
#ifndef PROT_EXEC
#define PROT_EXEC	0x4
#endif

/* One program on one tracepoint. */
struct exec_prog {
	struct probe *tp;
	struct ir *ir;
	struct bprog *prog;
};

struct engine_exec {
	struct exec_prog exec;		/* sched:sched_process_exec */
	struct exec_prog mmap_in;	/* syscalls:sys_enter_mmap */
	struct exec_prog mmap_out;	/* syscalls:sys_exit_mmap */
	struct bmap *ring;
	struct bmap *pending;		/* tid -> length: in an mmap() to report */
	struct bmap *known;		/* (s_dev, ino) -> 1: looked at, nothing to do */
	struct probe_file_offs fo;	/* where the program finds them (ok: have_fo) */
	bool have_fo;
	struct brbuf *rb;
	struct engine *e;
	struct proc_root_id *seen;	/* views looked at: fay's first */
	size_t nseen;
	pid_t pid;			/* > 0: only this process's (e->opts.pid) */
	bool hold;			/* it is stopped at each record (hold_execs) */
	struct bmap *follow;		/* with hold: it and its descendants */
	struct exec_prog fork;		/* with follow: sched:sched_process_fork */
	struct exec_prog exit;		/* with follow: sched:sched_process_exit */
	bool closing;			/* records read to continue their process */
	/* every process: one in another mount namespace is held at its
	 * mmap() record (x->pid 0 and the offsets found) */
	bool hold_new;
	struct probe_mntns_offs mo;
	uint32_t self_mnt;		/* the host's mount namespace's inode
					   (the kernel threads') */
	struct bmap *held;		/* pid -> 1: stopped, not continued yet */
	int guard;			/* the guard's pipe (write end), or -1 */
	uint64_t nheld;
	uint64_t nkids;
	uint64_t nexec, nviews, nfiles, nmaps, nknown;
};

/* The mapped file of an mmap() record is one no probe has anything more
 * to do with (probed already, another name, another version): the
 * program skips its later mappings, no record, no wake-up (a host
 * process's libc after the first).  The key as the program reads it:
 * the superblock's s_dev in the kernel's encoding, and the inode. */
static void remember_file(struct engine_exec *x, pid_t pid, uint64_t addr, uint64_t size)
{
	struct stat st;
	uint64_t key[2];
	uint8_t one = 1;

	if (!x->have_fo || x->nknown >= MMAP_KNOWN || proc_mapping_stat(pid, addr, size, &st))
		return;
	key[0] = ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev);
	key[1] = st.st_ino;
	if (!bmap_update(x->known, key, &one, BPF_ANY))
		x->nknown++;
}

static bool seen_view(struct engine_exec *x, const struct proc_root_id *id)
{
	for (size_t i = 0; i < x->nseen; i++)
		if (!memcmp(&x->seen[i], id, sizeof(*id)))
			return true;
	if (x->nseen < EXEC_MAX_VIEWS)
		x->seen[x->nseen++] = *id;
	return false;
}

/* A descendant of the followed command exec'ed (addr and size 0) or
 * mapped a file executable: every following probe on it alone.  True
 * when it runs on already (armed inline: its hold ended at its entry
 * point, and a SIGCONT now could end its next exec's hold before fay
 * looked). */
static bool follow_child(struct engine_exec *x, pid_t pid, uint64_t addr, uint64_t size)
{
	struct engine *e = x->e;
	char path[4096];

	/* inline: its runtime is loaded at its exec, before its loader
	 * maps anything; the mappings are the runtime's to arm */
	if (engine_inl_active(e))
		return !size && engine_inl_kid(e, pid) == 1;

	for (int i = e->nprogs - 1; i >= 0; i--) {
		struct probe *p = e->progs[i].probe;
		int rc = p ? probe_follow_child(p, pid, addr, size, path, sizeof(path)) : 0;

		if (rc > 0) {
			x->nkids++;
			pr_info("%s: process %d, a descendant, %s %s", e->progs[i].spec,
				(int)pid, size ? "mapped" : "started with", path);
		} else if (rc < 0) {
			pr_warn("%s", probe_strerror(p));
		}
	}
	return false;
}

/* A process that exec'ed (8 bytes: its pid) or mapped a file executable
 * (MMAP_REC: its pid, the address and the length): every following
 * probe, exit ones first (as engine_attach(): no entry recorded without
 * its exit). */
static int on_exec(void *ctx, const void *data, size_t size)
{
	struct engine_exec *x = ctx;
	struct engine *e = x->e;
	struct proc_root_id id;
	uint64_t rec[MMAP_REC / 8] = { 0 };
	char path[4096];
	bool mapped = size >= sizeof(rec);
	bool settled = true;	/* no probe wants to see this file again */
	bool held, going = false;	/* going: it runs on already */

	if (size < sizeof(rec[0]))
		return 0;
	memcpy(rec, data, mapped ? sizeof(rec) : sizeof(rec[0]));
	held = mapped && (rec[0] & HELD_BIT);
	rec[0] &= ~HELD_BIT;
	if (x->closing)
		goto out;
	if (x->follow && (pid_t)rec[0] != x->pid) {
		going = follow_child(x, (pid_t)rec[0], rec[1], rec[2]);
		goto out;
	}
	if (engine_inl_active(e)) {
		/* the command's own execs: its runtime follows them, but into
		 * another root, where it is loaded at the entry point */
		going = !mapped && engine_inl_kid(e, (pid_t)rec[0]) == 1;
		goto out;
	}
	if (mapped) {
		x->nmaps++;
	} else {
		x->nexec++;
		if (proc_root_id((pid_t)rec[0], &id) || seen_view(x, &id))
			goto out;
		x->nviews++;
	}
	for (int i = e->nprogs - 1; i >= 0; i--) {
		struct probe *p = e->progs[i].probe;
		int rc = !p ? 0 : mapped ?
			 probe_follow_mapping(p, (pid_t)rec[0], rec[1], rec[2], path,
					      sizeof(path)) :
			 probe_follow_pid(p, (pid_t)rec[0], path, sizeof(path));

		if (rc > 0) {
			x->nfiles++;
			pr_info("%s: one more file, %s (process %d, %s after the attach): "
				"%zu files", e->progs[i].spec, path, (int)rec[0],
				mapped ? "mapped" : "started", probe_nfiles(p));
		} else if (rc < 0) {
			settled = false;
			pr_warn("%s", probe_strerror(p));
		}
	}
	if (mapped && settled)
		remember_file(x, (pid_t)rec[0], rec[1], rec[2]);
out:
	/* its unwind table for the programs' walk, while it is stopped: its
	 * first calls in the new image walk by it */
	engine_ustack_update(e, (pid_t)rec[0]);
	/* the program stopped it after writing the record: on it goes (a
	 * record is of the followed processes alone) */
	if (x->hold && !going && (x->follow || (pid_t)rec[0] == x->pid))
		kill((pid_t)rec[0], SIGCONT);
	if (held) {
		uint32_t pid = (uint32_t)rec[0];

		x->nheld++;
		bmap_delete(x->held, &pid);
		kill((pid_t)pid, SIGCONT);
	}
	return 0;
}

/* Every pid of the map whose fd is map (held, follow) continued (the
 * guard's job too: after fork(), bmap_fd_next_key() is one system call,
 * no lock nor allocation). */
static void continue_held(int map)
{
	uint32_t k = 0, next;
	bool first = true;

	while (!bmap_fd_next_key(map, first ? NULL : &k, &next)) {
		kill((pid_t)next, SIGCONT);
		k = next;
		first = false;
	}
}

/* The guard: a grandchild of fay (reparented at once: none of fay's
 * waits reaps it), with nothing open but the maps (held, follow; -1:
 * none) and the pipe's read end, whose read returns when fay is gone
 * (killed, crashed: end of file) or done (a byte); then every process
 * still held is continued, and when fay is gone every process it
 * followed (a command's descendant it held at an exec: the program
 * stopped it, fay would have continued it; a SIGCONT to one running is
 * nothing to it). */
static void guard_run(int held, int follow, int rd)
{
	int keep[3] = { held, follow, rd }, null;
	ssize_t n;
	char c;

	if (fork() != 0)
		_exit(0);
	signal(SIGINT, SIG_IGN);	/* a Ctrl-C to fay's process group */
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	prctl(PR_SET_NAME, "fay-exec-guard");
	/* nothing of fay's kept open but these, as 3, 4, 5 (no terminal or
	 * pipe of fay's: a caller reading fay's output to its end) */
	for (int i = 0; i < 3; i++)
		keep[i] = keep[i] >= 0 ? fcntl(keep[i], F_DUPFD_CLOEXEC, 1000) : -1;
	close_range(3, 999, 0);
	for (int i = 0; i < 3; i++)
		if (keep[i] >= 0 && dup2(keep[i], 3 + i) == 3 + i)
			keep[i] = 3 + i;
	close_range(6, ~0u, 0);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int f = 0; f < 3 && null >= 0; f++)
		dup2(null, f);
	if (null > 5)
		close(null);
	while ((n = read(keep[2], &c, 1)) < 0 && errno == EINTR)
		;
	if (keep[0] >= 0)
		continue_held(keep[0]);
	if (n <= 0 && keep[1] >= 0)
		continue_held(keep[1]);
	_exit(0);
}

/* Start the guard of x->held and x->follow (either may be NULL).  0 or
 * -errno. */
static int guard_start(struct engine_exec *x)
{
	int fds[2], err;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		guard_run(x->held ? bmap_fd(x->held) : -1, x->follow ? bmap_fd(x->follow) : -1,
			  fds[0]);
	}
	err = pid < 0 ? -errno : 0;
	close(fds[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (err) {
		close(fds[1]);
		return err;
	}
	x->guard = fds[1];
	return 0;
}

static void prog_free(struct exec_prog *q)
{
	probe_free(q->tp);
	bprog_free(q->prog);
	ir_free(q->ir);
	memset(q, 0, sizeof(*q));
}

void engine_exec_free(struct engine *e)
{
	struct engine_exec *x = e->exec;

	if (!x)
		return;
	if (x->nviews || x->nmaps || x->nkids)
		pr_debug("exec watch: %llu execs, %llu new views of the file system, %llu "
			 "executable file mappings, %llu files added, %llu descendants' files",
			 (unsigned long long)x->nexec, (unsigned long long)x->nviews,
			 (unsigned long long)x->nmaps, (unsigned long long)x->nfiles,
			 (unsigned long long)x->nkids);
	for (int i = 0; i < e->nprogs; i++)
		if (e->progs[i].probe && probe_files_capped(e->progs[i].probe))
			pr_warn("%s: %zu files of the library left out: a probe is on at most %d",
				e->progs[i].spec, probe_files_capped(e->progs[i].probe),
				PROBE_MAX_FILES);
	/* the programs first: no process stopped from now on */
	prog_free(&x->exec);
	prog_free(&x->mmap_out);
	prog_free(&x->mmap_in);
	prog_free(&x->fork);
	prog_free(&x->exit);
	x->closing = true;	/* a record not read: its process continued */
	if (x->rb)
		brbuf_consume(x->rb);
	brbuf_free(x->rb);
	if (x->hold)
		kill(x->pid, SIGCONT);
	if (x->held && bmap_fd(x->held) >= 0)
		continue_held(bmap_fd(x->held));
	if (x->guard >= 0) {
		/* done, not gone: the guard continues the held ones alone
		 * (none now), not every process followed */
		if (write(x->guard, "x", 1) != 1) {
			/* then it continues those too: nothing is left stopped */
		}
		close(x->guard);
	}
	if (x->nheld)
		pr_debug("exec watch: %llu processes of other mount namespaces held at a "
			 "new file's mapping until it was looked at",
			 (unsigned long long)x->nheld);
	bmap_free(x->held);
	bmap_free(x->ring);
	bmap_free(x->pending);
	bmap_free(x->known);
	free(x->seen);
	free(x);
	e->exec = NULL;
}

/* The record at the stack slot rec, size bytes, into the ring; with
 * x->hold, the task stopped (SIGSTOP, taken on its way back to user
 * space) when it is there: on_exec() continues it.  The stop is queued
 * before the record is written: fay may read the record and send its
 * SIGCONT before this program's next instruction (a vCPU preempted in
 * between), and a SIGSTOP queued after that SIGCONT would stop the task
 * for good (a CI run of 2026-11-29: an nspawn container stopped at its exec for
 * the 120 s of the test's timeout).  No record: SIGCONT discards the
 * queued stop. */
static void emit_output(struct engine_exec *x, struct ir *ir, int rec, int size, int out)
{
	ir_reg r = ir_vreg(ir);

	if (x->hold)
		ir_call(ir, IR_NOREG, BPF_FUNC_send_signal, 1, IR_I(SIGSTOP));
	ir_call(ir, r, BPF_FUNC_ringbuf_output, 4, IR_M(x->ring), IR_S(rec), IR_I(size),
		IR_I(0));
	if (!x->hold)
		return;
	ir_jmp(ir, BPF_JEQ, r, IR_I(0), out);
	ir_call(ir, IR_NOREG, BPF_FUNC_send_signal, 1, IR_I(SIGCONT));
}

/* To out when the u32 at stack slot key is not in the follow map (r
 * clobbered). */
static void emit_followed(struct engine_exec *x, struct ir *ir, ir_reg r, int key, int out)
{
	ir_call(ir, r, BPF_FUNC_map_lookup_elem, 2, IR_M(x->follow), IR_S(key));
	ir_jmp(ir, BPF_JEQ, r, IR_I(0), out);
}

/* r = the current pid (tgid); with x->pid, to out when it is another
 * (with x->follow: none of the followed). */
static void emit_tgid(struct engine_exec *x, struct ir *ir, ir_reg r, int out)
{
	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, r, IR_I(32));
	if (x->follow) {
		int key = ir_stack_alloc(ir, 4, 4);
		ir_reg t = ir_vreg(ir);

		ir_store(ir, IR_S(key), 0, 4, IR_R(r));
		emit_followed(x, ir, t, key, out);
	} else if (x->pid > 0) {
		ir_jmp(ir, BPF_JNE, r, IR_I(x->pid), out);
	}
}

/* The program: the pid (tgid) of the task that exec'ed, into the ring. */
static int exec_prog(struct engine_exec *x, struct ir *ir, struct probe *tp)
{
	ir_reg r = ir_vreg(ir);
	int slot = ir_stack_alloc(ir, 8, 8);
	int out = ir_label_new(ir);

	(void)tp;
	emit_tgid(x, ir, r, out);
	ir_store(ir, IR_S(slot), 0, 8, IR_R(r));
	emit_output(x, ir, slot, 8, out);
	ir_label(ir, out);
	ir_exit(ir, IR_I(0));
	return ir_error(ir);
}

/* The offset of field name (size bytes) of tracepoint tp, or -1. */
static int tp_off_size(struct probe *tp, const char *name, unsigned int size)
{
	size_t n;
	const struct probe_field *f = probe_fields(tp, &n);

	for (size_t i = 0; f && i < n; i++)
		if (!strcmp(f[i].name, name) && f[i].size == (int)size)
			return f[i].offset;
	return -1;
}

static int tp_off(struct probe *tp, const char *name)
{
	return tp_off_size(tp, name, 8);
}

/* The program's end: map[stack slot key] = stack slot val, then label
 * out and the exit; returns ir_error(). */
static int emit_put_exit(struct ir *ir, struct bmap *map, int key, int val, int out)
{
	ir_call(ir, IR_NOREG, BPF_FUNC_map_update_elem, 4, IR_M(map), IR_S(key), IR_S(val),
		IR_I(BPF_ANY));
	ir_label(ir, out);
	ir_exit(ir, IR_I(0));
	return ir_error(ir);
}

/* sched_process_fork, in the parent: a child of a followed process
 * (field child_pid: a thread's too, taken out at its exit) is followed. */
static int fork_prog(struct engine_exec *x, struct ir *ir, struct probe *tp)
{
	int child = tp_off_size(tp, "child_pid", 4);
	int key = ir_stack_alloc(ir, 4, 4), one = ir_stack_alloc(ir, 8, 8);
	int out = ir_label_new(ir);
	ir_reg r = ir_vreg(ir);

	if (child < 0)
		return -ENOENT;
	emit_tgid(x, ir, r, out);
	ir_load(ir, r, IR_R(ir_ctx(ir)), child, 4, 0);
	ir_store(ir, IR_S(key), 0, 4, IR_R(r));
	ir_zero(ir, one, 8);
	ir_store(ir, IR_S(one), 0, 1, IR_I(1));
	return emit_put_exit(ir, x->follow, key, one, out);
}

/* sched_process_exit: a thread (not a process's leader) leaves the
 * follow map (fork_prog() put it there with the processes), and so does
 * the process once its last thread exits (task->signal->live is 0 then:
 * do_exit() counts it down before the tracepoint): its pid, free once it
 * is reaped, may be any other process's next, which is not the
 * command's (a leader that exits before its threads leaves the process
 * followed until they are gone).  Without the offsets (no BTF) the
 * process stays, as before. */
static int exit_prog(struct engine_exec *x, struct ir *ir, struct probe *tp)
{
	struct probe_task_offs o;
	int key = ir_stack_alloc(ir, 4, 4), k = ir_stack_alloc(ir, 8, 8);
	int out = ir_label_new(ir), proc = ir_label_new(ir);
	ir_reg r = ir_vreg(ir), t = ir_vreg(ir), p = ir_vreg(ir);
	bool live = !probe_task_offsets(&o) && o.signal >= 0;

	(void)tp;
	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_mov(ir, t, IR_R(r));
	ir_alu(ir, BPF_RSH, t, IR_I(32));
	ir_alu(ir, BPF_AND, r, IR_I(0x7fffffff));
	ir_jmp(ir, BPF_JEQ, r, IR_R(t), proc);	/* the leader */
	ir_store(ir, IR_S(key), 0, 4, IR_R(r));
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(x->follow), IR_S(key));
	ir_label(ir, proc);
	if (live) {
		ir_call(ir, p, BPF_FUNC_get_current_task, 0);
		engine_read_kernel(ir, p, p, o.signal, 8, k);
		ir_jmp(ir, BPF_JEQ, p, IR_I(0), out);
		engine_read_kernel(ir, p, p, o.signal_live, 4, k);
		ir_jmp(ir, BPF_JNE, p, IR_I(0), out);	/* threads left */
		ir_store(ir, IR_S(key), 0, 4, IR_R(t));
		ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(x->follow), IR_S(key));
	}
	ir_label(ir, out);
	ir_exit(ir, IR_I(0));
	return ir_error(ir);
}

/* p = the current task, then one pointer along each step: p = *(p +
 * step[i]) read with bpf_probe_read_kernel() through stack slot t (a
 * read that fails gives 0). */
static void emit_task_chase(struct ir *ir, ir_reg p, const int *step, size_t n, int t)
{
	ir_call(ir, p, BPF_FUNC_get_current_task, 0);
	for (size_t i = 0; i < n; i++) {
		ir_alu(ir, BPF_ADD, p, IR_I(step[i]));
		ir_zero(ir, t, 8);
		ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(t), IR_I(8), IR_R(p));
		ir_load(ir, p, IR_S(t), 0, 8, 0);
	}
}

/* To out when the file of the mmap()'s descriptor (field fd of the
 * context) is one of x->known: task->files->fdt->fd[fd]->f_inode's i_ino
 * and i_sb->s_dev, read with bpf_probe_read_kernel() (a read that fails
 * leaves 0: no such key, the mapping is reported). */
static void emit_known(struct engine_exec *x, struct ir *ir, int fd, int out)
{
	const struct probe_file_offs *o = &x->fo;
	int k = ir_stack_alloc(ir, 16, 8), t = ir_stack_alloc(ir, 8, 8);
	ir_reg p = ir_vreg(ir), f = ir_vreg(ir);
	const int step[] = { o->task_files, o->files_fdt, o->fdt_fd };

	ir_zero(ir, k, 16);
	emit_task_chase(ir, p, step, sizeof(step) / sizeof(step[0]), t);
	ir_load(ir, f, IR_R(ir_ctx(ir)), fd, 8, 0);
	ir_alu(ir, BPF_AND, f, IR_I(0x7fffffff));
	ir_alu(ir, BPF_LSH, f, IR_I(3));
	ir_alu(ir, BPF_ADD, p, IR_R(f));		/* &fd[fd] */
	ir_zero(ir, t, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(t), IR_I(8), IR_R(p));
	ir_load(ir, p, IR_S(t), 0, 8, 0);		/* struct file * */
	ir_alu(ir, BPF_ADD, p, IR_I(o->file_inode));
	ir_zero(ir, t, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(t), IR_I(8), IR_R(p));
	ir_load(ir, p, IR_S(t), 0, 8, 0);		/* struct inode * */
	ir_mov(ir, f, IR_R(p));
	ir_alu(ir, BPF_ADD, f, IR_I(o->inode_ino));
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k + 8), IR_I(8), IR_R(f));
	ir_alu(ir, BPF_ADD, p, IR_I(o->inode_sb));
	ir_zero(ir, t, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(t), IR_I(8), IR_R(p));
	ir_load(ir, p, IR_S(t), 0, 8, 0);		/* struct super_block * */
	ir_alu(ir, BPF_ADD, p, IR_I(o->sb_dev));
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(4), IR_R(p));
	ir_call(ir, p, BPF_FUNC_map_lookup_elem, 2, IR_M(x->known), IR_S(k));
	ir_jmp(ir, BPF_JNE, p, IR_I(0), out);
}

/* sys_enter_mmap: an mmap() of a file (fd >= 0) with PROT_EXEC: its
 * thread and length into the pending map. */
static int mmap_in_prog(struct engine_exec *x, struct ir *ir, struct probe *tp)
{
	int prot = tp_off(tp, "prot"), fd = tp_off(tp, "fd"), len = tp_off(tp, "len");
	int key = ir_stack_alloc(ir, 8, 8), val = ir_stack_alloc(ir, 8, 8);
	int out = ir_label_new(ir);
	ir_reg r = ir_vreg(ir);

	if (prot < 0 || fd < 0 || len < 0)
		return -ENOENT;
	ir_load(ir, r, IR_R(ir_ctx(ir)), prot, 8, 0);
	ir_alu(ir, BPF_AND, r, IR_I(PROT_EXEC));
	ir_jmp(ir, BPF_JEQ, r, IR_I(0), out);
	ir_load(ir, r, IR_R(ir_ctx(ir)), fd, 8, 0);
	ir_jmp(ir, BPF_JGT, r, IR_I(0x7fffffff), out);	/* -1: anonymous */
	if (x->pid > 0)
		emit_tgid(x, ir, r, out);
	if (x->have_fo && !x->follow)	/* a descendant's known file: its own uprobe */
		emit_known(x, ir, fd, out);
	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_store(ir, IR_S(key), 0, 8, IR_R(r));
	ir_load(ir, r, IR_R(ir_ctx(ir)), len, 8, 0);
	ir_store(ir, IR_S(val), 0, 8, IR_R(r));
	return emit_put_exit(ir, x->pending, key, val, out);
}

/* r = the inode of the current task's mount namespace (0 when a read
 * failed: an exiting task). */
static void emit_mntns(struct engine_exec *x, struct ir *ir, ir_reg r)
{
	const int step[] = { x->mo.task_nsproxy, x->mo.nsproxy_mnt_ns };
	int t = ir_stack_alloc(ir, 8, 8);

	emit_task_chase(ir, r, step, sizeof(step) / sizeof(step[0]), t);
	ir_alu(ir, BPF_ADD, r, IR_I(x->mo.mnt_ns_inum));
	ir_zero(ir, t, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(t), IR_I(4), IR_R(r));
	ir_load(ir, r, IR_S(t), 0, 4, 0);
}

/* Every process: the record at stack slot rec (its pid, tgid, in r) of a
 * task in another mount namespace than the host's is written held: the pid
 * into the held map, SIGSTOP queued (taken on the way back to user
 * space), then the record with HELD_BIT, and to out; without a record
 * it is not held (SIGCONT discards the queued stop).  A task of the
 * host's mount namespace falls through. */
static void emit_hold_new(struct engine_exec *x, struct ir *ir, int rec, ir_reg r, int out)
{
	int key = ir_stack_alloc(ir, 4, 4), one = ir_stack_alloc(ir, 8, 8);
	int plain = ir_label_new(ir);
	ir_reg m = ir_vreg(ir), t = ir_vreg(ir);

	emit_mntns(x, ir, m);
	ir_jmp(ir, BPF_JEQ, m, IR_I(0), plain);
	/* (an inode number is above INT32_MAX: compared in 32 bits) */
	ir_alu32(ir, BPF_XOR, m, IR_I((int32_t)x->self_mnt));
	ir_jmp(ir, BPF_JEQ, m, IR_I(0), plain);
	ir_store(ir, IR_S(key), 0, 4, IR_R(r));
	ir_zero(ir, one, 8);
	ir_store(ir, IR_S(one), 0, 1, IR_I(1));
	ir_call(ir, t, BPF_FUNC_map_update_elem, 4, IR_M(x->held), IR_S(key), IR_S(one),
		IR_I(BPF_ANY));
	ir_jmp(ir, BPF_JNE, t, IR_I(0), plain);	/* held map full: not held */
	ir_call(ir, IR_NOREG, BPF_FUNC_send_signal, 1, IR_I(SIGSTOP));
	ir_mov(ir, t, IR_I(1));
	ir_alu(ir, BPF_LSH, t, IR_I(32));
	ir_alu(ir, BPF_OR, t, IR_R(r));
	ir_store(ir, IR_S(rec), 0, 8, IR_R(t));
	ir_call(ir, t, BPF_FUNC_ringbuf_output, 4, IR_M(x->ring), IR_S(rec), IR_I(MMAP_REC),
		IR_I(0));
	ir_jmp(ir, BPF_JEQ, t, IR_I(0), out);
	ir_call(ir, IR_NOREG, BPF_FUNC_send_signal, 1, IR_I(SIGCONT));
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(x->held), IR_S(key));
	ir_goto(ir, out);
	ir_label(ir, plain);
}

/* sys_exit_mmap: a pending thread's call, when it succeeded: the pid, the
 * address and the length into the ring. */
static int mmap_out_prog(struct engine_exec *x, struct ir *ir, struct probe *tp)
{
	int ret = tp_off(tp, "ret");
	int key = ir_stack_alloc(ir, 8, 8), rec = ir_stack_alloc(ir, MMAP_REC, 8);
	int out = ir_label_new(ir);
	ir_reg r = ir_vreg(ir), v = ir_vreg(ir), l = ir_vreg(ir);

	if (ret < 0)
		return -ENOENT;
	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_store(ir, IR_S(key), 0, 8, IR_R(r));
	ir_call(ir, v, BPF_FUNC_map_lookup_elem, 2, IR_M(x->pending), IR_S(key));
	ir_jmp(ir, BPF_JEQ, v, IR_I(0), out);
	ir_load(ir, l, IR_R(v), 0, 8, 0);
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(x->pending), IR_S(key));
	ir_load(ir, v, IR_R(ir_ctx(ir)), ret, 8, 0);
	ir_jmp(ir, BPF_JGT, v, IR_I(-4096), out);	/* -errno: failed */
	ir_alu(ir, BPF_RSH, r, IR_I(32));
	ir_store(ir, IR_S(rec), 0, 8, IR_R(r));
	ir_store(ir, IR_S(rec), 8, 8, IR_R(v));
	ir_store(ir, IR_S(rec), 16, 8, IR_R(l));
	if (x->hold_new)
		emit_hold_new(x, ir, rec, r, out);
	emit_output(x, ir, rec, MMAP_REC, out);
	ir_label(ir, out);
	ir_exit(ir, IR_I(0));
	return ir_error(ir);
}

/* Load program build on tracepoint name into q.  0, or -errno with why. */
static int prog_start(struct engine_exec *x, struct exec_prog *q, const char *name,
		      int (*build)(struct engine_exec *, struct ir *, struct probe *),
		      char *why, size_t whylen)
{
	struct probe_opts po = { .sz = sizeof(po) };
	struct bprog_opts o;
	struct bprog_diag d;
	int err;

	q->tp = probe_new(PROBE_TRACEPOINT, name, &po, why, whylen);
	if (!q->tp)
		return errno ? -errno : -ENOENT;
	q->ir = ir_new("fay_exec");
	if (!q->ir) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	err = build(x, q->ir, q->tp);
	if (err) {
		snprintf(why, whylen, "internal: the program on %s: %s", name, errstr(err));
		return err;
	}
	probe_prog_opts(q->tp, &o);
	q->prog = bprog_load(q->ir, &o, &d);
	if (!q->prog) {
		err = d.err ? d.err : -EINVAL;
		snprintf(why, whylen, "%s", d.msg);
		bprog_diag_clear(&d);
		return err;
	}
	err = probe_attach(q->tp, bprog_fd(q->prog));
	if (err)
		snprintf(why, whylen, "%s", probe_strerror(q->tp));
	return err;
}

/* The exit and fork programs on x->follow (the command's descendants):
 * 0, or -errno with a warning and neither loaded (only the command's
 * own process is followed then). */
static int start_follow(struct engine_exec *x)
{
	char why[512] = "";
	int err = prog_start(x, &x->exit, "sched:sched_process_exit", exit_prog, why,
			     sizeof(why));

	err = err ? : prog_start(x, &x->fork, "sched:sched_process_fork", fork_prog, why,
				 sizeof(why));
	if (err) {
		pr_warn("the command's descendants are not followed (only its own process "
			"is): %s", why);
		prog_free(&x->fork);
		prog_free(&x->exit);
	}
	return err;
}

/* A command fay started whose probes are on no file (syscalls,
 * tracepoints, profile): nothing to look at in its execs, only its
 * descendants to follow (the fork and exit programs on the follow map
 * cg_pid_filter() checks). */
static int follow_only(struct engine *e)
{
	struct engine_exec *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->e = e;
	x->guard = -1;
	x->pid = e->opts.pid;
	x->follow = e->follow;
	e->exec = x;
	if (start_follow(x))
		engine_exec_free(e);
	return 0;
}

/* The follow map with the command's pid in it, or NULL. */
static struct bmap *follow_map_new(struct engine *e)
{
	uint32_t pid = (uint32_t)e->opts.pid;
	uint8_t one = 1;
	struct bmap *m = bmap_new("fay_follow", BPF_MAP_TYPE_HASH, 4, 1, FOLLOW_MAX);

	if (m && (bmap_create(m) || bmap_update(m, &pid, &one, BPF_ANY))) {
		bmap_free(m);
		m = NULL;
	}
	return m;
}

int engine_exec_start(struct engine *e)
{
	struct engine_exec *x;
	struct proc_root_id self;
	char why[512] = "";
	bool want = false;
	pid_t pid = -1;		/* the one process every following probe is on, or 0 */
	int err;

	for (int i = 0; i < e->nprogs; i++) {
		if (!e->progs[i].probe || !probe_follows_processes(e->progs[i].probe))
			continue;
		want = true;
		pid = pid < 0 || pid == e->progs[i].popts.pid ? e->progs[i].popts.pid : 0;
	}
	/* a program walks the command's stacks by its table (a profile's:
	 * codegen_ustack.c): held at its execs and mmap()s until its table
	 * is made anew, so that its first sample finds it */
	if (!want && e->opts.hold_execs && e->unwind && bmap_fd(e->unwind) >= 0) {
		want = true;
		pid = e->opts.pid;
	}
	if (!want && e->follow && !e->exec)
		return follow_only(e);
	if (!want || e->exec)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x || !(x->seen = calloc(EXEC_MAX_VIEWS, sizeof(*x->seen)))) {
		free(x);
		return -ENOMEM;
	}
	x->e = e;
	x->guard = -1;
	x->pid = pid > 0 ? pid : 0;
	x->hold = e->opts.hold_execs && x->pid > 0 && x->pid == e->opts.pid;
	/* (inline: a map of the exec watch's alone; the programs, in the
	 * processes, filter nothing) */
	if (x->hold && e->inl && !e->follow)
		e->follow = follow_map_new(e);
	x->follow = x->hold ? e->follow : NULL;
	e->exec = x;
	if (!proc_root_id(0, &self))	/* fay's view: the files it resolved */
		x->seen[x->nseen++] = self;
	x->ring = bmap_new("fay_exec", BPF_MAP_TYPE_RINGBUF, 0, 0, EXEC_RING_BYTES);
	/* LRU: a thread killed inside mmap() never leaves by itself */
	x->pending = bmap_new("fay_mmap", BPF_MAP_TYPE_LRU_HASH, 8, 8, MMAP_PENDING);
	x->known = bmap_new("fay_known", BPF_MAP_TYPE_HASH, 16, 1, MMAP_KNOWN);
	x->have_fo = x->known && !probe_file_offsets(&x->fo);
	if (!x->pid && x->have_fo) {
		struct stat mnt, pidns;
		/* only from the host's pid namespace, and against the host's
		 * mount namespace (the initial one), not fay's own: a fay in a
		 * container, or in a unit with a private mount namespace
		 * (PrivateTmp=), must never stop the host's processes */
		bool host = !stat("/proc/self/ns/pid", &pidns) &&
			    pidns.st_ino == PROC_PID_INIT_INO;

		x->held = bmap_new("fay_held", BPF_MAP_TYPE_HASH, 4, 1, HELD_MAX);
		/* the host's: the kernel's own threads' (kthreadd, pid 2 in the
		 * host's pid namespace, has the initial namespaces), else pid
		 * 1's; neither readable: no hold */
		x->hold_new = host && x->held && !probe_mntns_offsets(&x->mo) &&
			      (!stat("/proc/2/ns/mnt", &mnt) || !stat("/proc/1/ns/mnt", &mnt)) &&
			      !bmap_create(x->held) && !guard_start(x);
		x->self_mnt = x->hold_new ? (uint32_t)mnt.st_ino : 0;
		if (!x->hold_new)
			pr_warn("processes of other mount namespaces (containers) are not "
				"held at a new library's mapping%s: their first calls, made "
				"before fay attached to it, are not counted",
				host ? "" : " (fay is not in the host's pid namespace)");
	}
	if (!x->ring || !x->pending || !x->known) {
		err = -ENOMEM;
		snprintf(why, sizeof(why), "out of memory");
		goto fail;
	}
	/* the fork program before the exec one: no child unseen between;
	 * a descendant held at an exec when fay dies is the guard's to
	 * continue */
	if (x->follow) {
		start_follow(x);
		if (x->guard < 0 && guard_start(x))
			pr_warn("no guard for the command's descendants held at their "
				"execs: if fay dies, one held then stays stopped");
	}
	err = prog_start(x, &x->exec, "sched:sched_process_exec", exec_prog, why, sizeof(why));
	if (err)
		goto fail;
	x->rb = brbuf_new(x->ring, 0, on_exec, NULL, x);
	if (!x->rb) {
		err = -errno;
		snprintf(why, sizeof(why), "cannot map the ring buffer: %s", errstr(err));
		goto fail;
	}
	/* the exit first: an entry is kept only once its exit will see it.
	 * Inline (a command's processes armed at their entry points): no
	 * mmap() watch, whose records are the runtime's to arm, and whose
	 * holds, ended late (the loader's mmap()s while fay loads the
	 * runtime), would let the process's next exec run on unlooked at */
	if (e->inl) {
		x->have_fo = false;
	} else if (prog_start(x, &x->mmap_out, "syscalls:sys_exit_mmap", mmap_out_prog, why,
		       sizeof(why)) ||
	    prog_start(x, &x->mmap_in, "syscalls:sys_enter_mmap", mmap_in_prog, why,
		       sizeof(why))) {
		pr_warn("libraries mapped from now on from elsewhere than a root's library "
			"directories (dlopen(), LD_LIBRARY_PATH) are not looked at: %s", why);
		prog_free(&x->mmap_in);
		prog_free(&x->mmap_out);
		x->have_fo = false;
		memset(&x->mmap_in, 0, sizeof(x->mmap_in));
		memset(&x->mmap_out, 0, sizeof(x->mmap_out));
	}
	return 0;
fail:
	pr_warn("processes started from now on are not looked at for new files of the "
		"library (a container's own copy): watching execs: %s", why);
	engine_exec_free(e);
	return err;
}

struct bmap *engine_follow_map(struct engine *e)
{
	if (!e->opts.hold_execs || e->opts.pid <= 0 || e->inl)
		return NULL;
	if (!e->follow)
		e->follow = follow_map_new(e);
	return e->follow;
}

int engine_exec_fd(const struct engine *e)
{
	return e->exec && e->exec->rb ? brbuf_fd(e->exec->rb) : -1;
}

int engine_exec_consume(struct engine *e)
{
	return e->exec && e->exec->rb ? brbuf_consume(e->exec->rb) : 0;
}
