// SPDX-License-Identifier: MIT
/*
 * The libfay span a profile(...) sample interrupted (trace_id, span_name
 * of a profile event): libfay publishes each thread's innermost open
 * recorded span in a cell of its shm file (struct fay_cur_cell,
 * include/fay/ring.h, docs/ABI.md 1.6).  The reader's side finds the
 * libfay processes (their files in engine_opts.shm_dir, else
 * $FAY_SHM_DIR, else /dev/shm; where /proc/PID/maps says each maps its
 * file) and keeps a BPF hash, tgid -> the user addresses of the
 * process's cell table and file; the probe's side looks the
 * sampled process up, reads the thread's cell and the span's handle with
 * bpf_probe_read_user() and trusts them only when the handle is open
 * with the cell's span id.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fay/ring.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/procstat.h"
#include "engine/codegen.h"
#include "probe/probe.h"

#define SPANCUR_PROCS   1024	/* libfay processes in the map at once */
#define SPANCUR_TICK_NS 250000000ull	/* the look for gone processes */
#define SPANCUR_RETRY_NS 2000000ull	/* a file not live yet */
#define SPANCUR_TRIES   8		/* more looks for a process not found */

/* The map's value (the probe reads it at these offsets). */
struct spancur_val {
	uint64_t cells;		/* address of cell 0 in the process */
	uint64_t base;		/* address of the file's byte 0 */
	uint32_t mask;		/* ncur - 1 */
	uint32_t _pad;
	/* The process's start (task->group_leader->start_boottime, ns) is
	 * in [start_lo, start_hi): /proc/PID/stat's start tick, so a pid
	 * reused by another process never reads this one's addresses. */
	uint64_t start_lo, start_hi;
};

/* What the probe reads of a cell: tid, span_id, slot_off. */
#define CELL_READ	24

/* Offsets in the handle (struct fay_pool_slot, docs/ABI.md 1.3): */
#define SL_STATE	0
#define SL_TRACE_LO	(16 + 8)
#define SL_SPAN_ID	(16 + 16)
#define SL_ITEM		80	/* the first item: the name (type u8, _, alen u16, blen u16) */
#define SL_READ		88
#define ITEM_NAME	1	/* SPAN_ITEM_NAME */
#define ITEM_HDR	6	/* SPANREC_ITEM_HDR */
#define POOL_OPEN	1	/* FAY_POOL_OPEN */

static struct bmap *spancur_map(struct engine *e)
{
	if (!e->spancur)
		e->spancur = bmap_new("fay_spancur", BPF_MAP_TYPE_HASH, 4,
				      sizeof(struct spancur_val), SPANCUR_PROCS);
	return e->spancur;
}

void engine_read_kernel(struct ir *ir, ir_reg r, ir_reg p, int off, int size, int k)
{
	ir_zero(ir, k, 8);
	ir_mov(ir, r, IR_R(p));
	ir_alu(ir, BPF_ADD, r, IR_I(off));
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(size), IR_R(r));
	ir_load(ir, r, IR_S(k), 0, size, 0);
}

/*
 * Emit: the sampled thread's id as libfay knows it (gettid() in its own
 * pid namespace) into tid, and jump to none unless the process started
 * in the value's [start_lo, start_hi) (v: the map's value).  With no BTF
 * offsets, the root namespace's tid and no start test (the key alone).
 */
static void emit_task(struct ir *ir, ir_reg pt, ir_reg v, ir_reg tid, int none)
{
	struct probe_task_offs o;
	int k = ir_stack_alloc(ir, 8, 8);
	ir_reg task = ir_vreg(ir), p = ir_vreg(ir), t = ir_vreg(ir);

	if (probe_task_offsets(&o)) {
		ir_mov(ir, tid, IR_R(pt));
		ir_alu(ir, BPF_LSH, tid, IR_I(32));
		ir_alu(ir, BPF_RSH, tid, IR_I(32));
		return;
	}
	ir_call(ir, task, BPF_FUNC_get_current_task, 0);
	if (o.start_boottime >= 0) {
		engine_read_kernel(ir, p, task, o.group_leader, 8, k);
		engine_read_kernel(ir, p, p, o.start_boottime, 8, k);
		ir_load(ir, t, IR_R(v), offsetof(struct spancur_val, start_lo), 8, 0);
		ir_jmp(ir, BPF_JLT, p, IR_R(t), none);
		ir_load(ir, t, IR_R(v), offsetof(struct spancur_val, start_hi), 8, 0);
		ir_jmp(ir, BPF_JGE, p, IR_R(t), none);
	}
	/* task->thread_pid->numbers[level].nr: the thread's own namespace */
	engine_read_kernel(ir, p, task, o.thread_pid, 8, k);
	engine_read_kernel(ir, t, p, o.pid_level, 4, k);
	ir_alu(ir, BPF_AND, t, IR_I(31));		/* MAX_PID_NS_LEVEL is 32 */
	ir_alu(ir, BPF_MUL, t, IR_I(o.upid_size));
	ir_alu(ir, BPF_ADD, p, IR_R(t));
	engine_read_kernel(ir, tid, p, o.pid_numbers + o.upid_nr, 4, k);
	ir_jmp(ir, BPF_JEQ, tid, IR_I(0), none);
}

/*
 * Emit: the sampled thread's current span's handle into the stack at sl
 * (SL_READ bytes); jump to none when there is none (not a libfay
 * process, another process with its pid, no cell, no open span, a torn
 * or stale cell).  The map's key is the root namespace's tgid; the cell
 * is the one of the thread's tid in its own namespace.
 */
static void emit_handle(struct cg *g, const struct pexpr *x, int sl, int none)
{
	struct ir *ir = g->ir;
	struct bmap *m = spancur_map(g->e);
	int key = ir_stack_alloc(ir, 8, 8), cell = ir_stack_alloc(ir, CELL_READ, 8);
	ir_reg pt = ir_vreg(ir), v = ir_vreg(ir), a = ir_vreg(ir), t = ir_vreg(ir);
	ir_reg tid = ir_vreg(ir), base = ir_vreg(ir), sid = ir_vreg(ir);

	if (!m) {
		cg_qfail(g, x, "out of memory");
		return;
	}
	ir_call(ir, pt, BPF_FUNC_get_current_pid_tgid, 0);
	ir_mov(ir, t, IR_R(pt));
	ir_alu(ir, BPF_RSH, t, IR_I(32));
	ir_store(ir, IR_S(key), 0, 8, IR_R(t));
	ir_call(ir, v, BPF_FUNC_map_lookup_elem, 2, IR_M(m), IR_S(key));
	ir_jmp(ir, BPF_JEQ, v, IR_I(0), none);
	emit_task(ir, pt, v, tid, none);
	/* the cell: cells + (tid & mask) * FAY_CUR_CELL_SIZE */
	ir_load(ir, base, IR_R(v), offsetof(struct spancur_val, base), 8, 0);
	ir_load(ir, t, IR_R(v), offsetof(struct spancur_val, mask), 4, 0);
	ir_load(ir, a, IR_R(v), offsetof(struct spancur_val, cells), 8, 0);
	ir_alu(ir, BPF_AND, t, IR_R(tid));
	ir_alu(ir, BPF_MUL, t, IR_I(FAY_CUR_CELL_SIZE));
	ir_alu(ir, BPF_ADD, a, IR_R(t));
	ir_call(ir, t, BPF_FUNC_probe_read_user, 3, IR_S(cell), IR_I(CELL_READ), IR_R(a));
	ir_jmp(ir, BPF_JNE, t, IR_I(0), none);
	ir_load(ir, t, IR_S(cell), offsetof(struct fay_cur_cell, tid), 4, 0);
	ir_jmp(ir, BPF_JNE, t, IR_R(tid), none);
	ir_load(ir, sid, IR_S(cell), offsetof(struct fay_cur_cell, span_id), 8, 0);
	ir_load(ir, a, IR_S(cell), offsetof(struct fay_cur_cell, slot_off), 8, 0);
	ir_jmp(ir, BPF_JEQ, a, IR_I(0), none);
	ir_alu(ir, BPF_ADD, a, IR_R(base));
	ir_call(ir, t, BPF_FUNC_probe_read_user, 3, IR_S(sl), IR_I(SL_READ), IR_R(a));
	ir_jmp(ir, BPF_JNE, t, IR_I(0), none);
	ir_load(ir, t, IR_S(sl), SL_STATE, 4, 0);
	ir_jmp(ir, BPF_JNE, t, IR_I(POOL_OPEN), none);
	ir_load(ir, t, IR_S(sl), SL_SPAN_ID, 8, 0);
	ir_jmp(ir, BPF_JNE, t, IR_R(sid), none);
	/* the name item's bytes are read from the process below: keep its
	 * address where the span id was */
	ir_alu(ir, BPF_ADD, a, IR_I(SL_ITEM + ITEM_HDR));
	ir_store(ir, IR_S(sl), SL_SPAN_ID, 8, IR_R(a));
}

ir_reg cg_spancur_trace(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	int sl = ir_stack_alloc(ir, SL_READ, 8), none = ir_label_new(ir);
	ir_reg r = ir_vreg(ir);

	ir_mov(ir, r, IR_I(0));
	emit_handle(g, x, sl, none);
	ir_load(ir, r, IR_S(sl), SL_TRACE_LO, 8, 0);
	ir_label(ir, none);
	return r;
}

void cg_spancur_name(struct cg *g, const struct pexpr *x, int off, int size)
{
	struct ir *ir = g->ir;
	int sl = ir_stack_alloc(ir, SL_READ, 8), none = ir_label_new(ir);
	int fit = ir_label_new(ir);
	ir_reg t = ir_vreg(ir), n = ir_vreg(ir), a = ir_vreg(ir);

	ir_zero(ir, off, (unsigned)size);
	emit_handle(g, x, sl, none);
	ir_load(ir, t, IR_S(sl), SL_ITEM, 1, 0);
	ir_jmp(ir, BPF_JNE, t, IR_I(ITEM_NAME), none);
	/* alen bytes, cut to size - 1 (as fay_current_span() cuts) */
	ir_load(ir, n, IR_S(sl), SL_ITEM + 2, 2, 0);
	ir_jmp(ir, BPF_JLE, n, IR_I(size - 1), fit);
	ir_mov(ir, n, IR_I(size - 1));
	ir_label(ir, fit);
	ir_load(ir, a, IR_S(sl), SL_SPAN_ID, 8, 0);
	ir_call(ir, t, BPF_FUNC_probe_read_user, 3, IR_S(off), IR_R(n), IR_R(a));
	/* a failed read may leave part: "" then, never garbage */
	ir_jmp(ir, BPF_JEQ, t, IR_I(0), none);
	ir_zero(ir, off, (unsigned)size);
	ir_label(ir, none);
}

/* ---- the reader's side: which processes, where ------------------------- */

/* A libfay file known to the reader: its name's (pid, instance), the
 * process (root namespace pid and start tick) it is in the map for, or
 * none (gone, or not found: looked for again at the next SPANCUR_TRIES
 * looks, then no more while the file is there; libfay never removes its
 * files, so those of processes gone long ago cost one look each). */
struct spancur_proc {
	uint32_t nspid;		/* the pid in the file's name (its namespace's) */
	uint64_t instance;
	uint32_t pid;		/* the map's key; 0: not in the map */
	unsigned long long start;	/* /proc/pid/stat's start tick */
	int tries;		/* looks left for one not found */
	bool seen;
};

/* A process in another pid namespace: its pid there and here. */
struct spancur_ns {
	uint32_t nspid, pid;
};

struct engine_spancur {
	struct spancur_proc *p;
	size_t n, cap;
	int in_map;
	struct spancur_ns *ns;	/* this scan's, made when first needed */
	size_t nns, nscap;
	bool ns_made;
	uint64_t next_ns;
	int ino;		/* inotify on the directory, or -1 */
	char dir[4096];
};

/* Where process pid maps the file (dev, ino) from byte 0, or 0. */
static uint64_t mapped_at(uint32_t pid, dev_t dev, ino_t ino)
{
	char f[64], line[4352];
	uint64_t at = 0;
	FILE *m;

	snprintf(f, sizeof(f), "/proc/%" PRIu32 "/maps", pid);
	m = fopen(f, "re");
	if (!m)
		return 0;
	while (!at && fgets(line, sizeof(line), m)) {
		unsigned long long lo, hi, off, in;
		unsigned maj, min;

		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &lo, &hi, &off, &maj, &min,
			   &in) == 6 && !off && in == (unsigned long long)ino &&
		    maj == major(dev) && min == minor(dev))
			at = lo;
	}
	fclose(m);
	return at;
}

/* The processes in other pid namespaces (NSpid of /proc/N/status with
 * more than one number), once per scan. */
static void ns_index(struct engine_spancur *s)
{
	struct dirent *d;
	DIR *dh;

	s->ns_made = true;
	s->nns = 0;
	dh = opendir("/proc");
	while (dh && (d = readdir(dh))) {
		unsigned long long ns[32];
		char *end;
		unsigned long n = strtoul(d->d_name, &end, 10);
		int k;

		if (*end || !n || n > UINT32_MAX)
			continue;
		k = proc_status_nums((pid_t)n, "NSpid", ns, 32);
		if (k < 2 || ns[k - 1] > UINT32_MAX)
			continue;
		if (array_grow((void **)&s->ns, s->nns, &s->nscap, sizeof(*s->ns), 256))
			break;
		s->ns[s->nns++] = (struct spancur_ns){ .nspid = (uint32_t)ns[k - 1],
						       .pid = (uint32_t)n };
	}
	if (dh)
		closedir(dh);
}

/* The root namespace's pid of the process that maps (dev, ino) and is
 * nspid in its own namespace, or 0: the pid itself (the host's
 * processes), else one whose NSpid ends in nspid (a process in another
 * pid namespace writing to this directory). */
static uint32_t root_pid(struct engine_spancur *s, uint32_t nspid, dev_t dev, ino_t ino,
			 uint64_t *at)
{
	*at = mapped_at(nspid, dev, ino);
	if (*at)
		return nspid;
	if (!s->ns_made)
		ns_index(s);
	for (size_t i = 0; i < s->nns; i++)
		if (s->ns[i].nspid == nspid && (*at = mapped_at(s->ns[i].pid, dev, ino)))
			return s->ns[i].pid;
	return 0;
}

/* The map's value for the file at path (its header checked) into *v,
 * the process's root pid and start tick into *pid, *start: 0, or
 * -errno (-EAGAIN: not live yet). */
static int file_val(struct engine_spancur *s, const char *path, uint32_t nspid, uint64_t instance, uint32_t *pid,
		    unsigned long long *start, struct spancur_val *v)
{
	struct fay_shm_hdr h;
	struct stat st;
	uint64_t at;
	long tck = sysconf(_SC_CLK_TCK);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, &h, sizeof(h), 0);
	if (fstat(fd, &st))
		got = -1;
	close(fd);
	if (got != (ssize_t)sizeof(h) || h.magic != FAY_SHM_MAGIC || h.version != FAY_SHM_VERSION)
		return -EINVAL;
	if (h.state != FAY_SHM_LIVE)
		return -EAGAIN;
	if (h.pid != nspid || h.instance != instance)
		return -EINVAL;
	/* an older libfay has no table (0): nothing to read, not an error */
	if (!h.ncur || h.ncur & (h.ncur - 1) || h.cur_stride != FAY_CUR_CELL_SIZE ||
	    h.cur_off % 8 || h.cur_off < FAY_SHM_HDR_SIZE || h.cur_off > h.file_size ||
	    (uint64_t)h.ncur * FAY_CUR_CELL_SIZE > h.file_size - h.cur_off)
		return -ENOENT;
	*pid = root_pid(s, h.pid, st.st_dev, st.st_ino, &at);
	if (!*pid || proc_start_ticks((pid_t)*pid, start) || tck <= 0)
		return -ESRCH;
	*v = (struct spancur_val){
		.cells = at + h.cur_off, .base = at, .mask = h.ncur - 1,
		.start_lo = *start * (1000000000ull / (uint64_t)tck),
		.start_hi = (*start + 1) * (1000000000ull / (uint64_t)tck),
	};
	return 0;
}

/* Is the process of p still the one in the map? */
static bool still_there(const struct spancur_proc *p)
{
	unsigned long long t;

	return !proc_start_ticks((pid_t)p->pid, &t) && t == p->start;
}

static void scan(struct engine *e, struct engine_spancur *s, uint64_t now)
{
	char path[4096 + 256];
	struct dirent *d;
	DIR *dh;

	s->ns_made = false;
	for (size_t i = 0; i < s->n; i++)
		s->p[i].seen = false;
	dh = opendir(s->dir);
	while (dh && (d = readdir(dh))) {
		size_t l = strlen(d->d_name);
		unsigned long long pid, inst, start = 0;
		struct spancur_val v;
		uint32_t rpid = 0;
		size_t i;
		int err;

		if (strncmp(d->d_name, FAY_SHM_PREFIX, strlen(FAY_SHM_PREFIX)) ||
		    l < strlen(FAY_SHM_SUFFIX) ||
		    strcmp(d->d_name + l - strlen(FAY_SHM_SUFFIX), FAY_SHM_SUFFIX) ||
		    sscanf(d->d_name + strlen(FAY_SHM_PREFIX), "%llu-%llx", &pid, &inst) != 2 ||
		    pid > UINT32_MAX)
			continue;
		for (i = 0; i < s->n; i++)
			if (s->p[i].nspid == pid && s->p[i].instance == inst)
				break;
		if (i < s->n && (s->p[i].pid || !s->p[i].tries)) {
			/* known: kept while its process is */
			s->p[i].seen = !s->p[i].pid || still_there(&s->p[i]);
			continue;
		}
		if (i == s->n && array_grow((void **)&s->p, s->n, &s->cap, sizeof(*s->p), 64))
			break;
		snprintf(path, sizeof(path), "%s/%s", s->dir, d->d_name);
		err = file_val(s, path, (uint32_t)pid, inst, &rpid, &start, &v);
		if (err == -EAGAIN) {
			s->next_ns = now + SPANCUR_RETRY_NS;	/* soon: it is being made */
			continue;
		}
		if (err || s->in_map == SPANCUR_PROCS || bmap_update(e->spancur, &rpid, &v, BPF_ANY))
			rpid = 0;
		s->in_map += rpid != 0;
		if (i < s->n) {		/* another look at one not found */
			s->p[i].pid = rpid;
			s->p[i].start = start;
			s->p[i].tries--;
			s->p[i].seen = true;
			continue;
		}
		s->p[s->n++] = (struct spancur_proc){ .nspid = (uint32_t)pid, .instance = inst,
			.pid = rpid, .start = start, .tries = SPANCUR_TRIES, .seen = true };
	}
	if (dh)
		closedir(dh);
	for (size_t i = 0; i < s->n;) {
		if (s->p[i].seen) {
			i++;
			continue;
		}
		if (s->p[i].pid) {
			bmap_delete(e->spancur, &s->p[i].pid);
			s->in_map--;
		}
		s->p[i] = s->p[--s->n];
	}
}

/* The state, made at the first tick: the directory and its inotify. */
static struct engine_spancur *state(struct engine *e)
{
	struct engine_spancur *s = e->spancur_st;
	const char *dir = e->opts.shm_dir;

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (!dir || !*dir)
		dir = getenv("FAY_SHM_DIR");
	if (!dir || !*dir)
		dir = "/dev/shm";
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	/* libfay renames a file into place once it is mapped and live */
	s->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ino >= 0 && inotify_add_watch(s->ino, s->dir, IN_MOVED_TO | IN_CREATE) < 0) {
		close(s->ino);
		s->ino = -1;
	}
	e->spancur_st = s;
	return s;
}

bool engine_spancur_tick(struct engine *e)
{
	struct engine_spancur *s;
	uint64_t now;
	char buf[4096];

	if (!e->spancur || bmap_fd(e->spancur) < 0 || e->vm)
		return false;
	s = state(e);
	if (!s)
		return false;
	now = clock_monotonic_ns();
	if (s->ino >= 0 && read(s->ino, buf, sizeof(buf)) > 0) {
		while (read(s->ino, buf, sizeof(buf)) > 0)
			;
		s->next_ns = now;	/* a new file: look now */
	}
	if (now >= s->next_ns) {
		s->next_ns = now + SPANCUR_TICK_NS;
		scan(e, s, now);
	}
	return true;
}

int engine_spancur_fd(const struct engine *e)
{
	return e->spancur_st ? e->spancur_st->ino : -1;
}

uint64_t engine_spancur_wake(const struct engine *e)
{
	return e->spancur_st ? e->spancur_st->next_ns : UINT64_MAX;
}

void engine_spancur_free(struct engine *e)
{
	if (e->spancur_st) {
		if (e->spancur_st->ino >= 0)
			close(e->spancur_st->ino);
		free(e->spancur_st->p);
		free(e->spancur_st->ns);
	}
	free(e->spancur_st);
	e->spancur_st = NULL;
	bmap_free(e->spancur);
	e->spancur = NULL;
}
