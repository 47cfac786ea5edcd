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

#include <fay/ring.h>

#include "common/clock.h"
#include "engine/codegen.h"

#define SPANCUR_PROCS   1024	/* libfay processes followed at once */
#define SPANCUR_TICK_NS 250000000ull

/* The map's value (the probe reads it at these offsets). */
struct spancur_val {
	uint64_t cells;		/* address of cell 0 in the process */
	uint64_t base;		/* address of the file's byte 0 */
	uint32_t mask;		/* ncur - 1 */
	uint32_t _pad;
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

/*
 * Emit: the sampled thread's current span's handle into the stack at sl
 * (SL_READ bytes); jump to none when there is none (not a libfay
 * process, no cell, no open span, a torn or stale cell).
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
	/* the cell: cells + (tid & mask) * FAY_CUR_CELL_SIZE */
	ir_mov(ir, tid, IR_R(pt));
	ir_alu(ir, BPF_LSH, tid, IR_I(32));
	ir_alu(ir, BPF_RSH, tid, IR_I(32));
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

struct spancur_proc {
	uint32_t pid;
	uint64_t instance;
	bool seen;
};

struct engine_spancur {
	struct spancur_proc p[SPANCUR_PROCS];
	int n;
	uint64_t next_ns;
};

/* Where the process pid maps path (from byte 0), or 0. */
static uint64_t mapped_at(uint32_t pid, const char *path)
{
	char f[64], line[4352];
	uint64_t at = 0;
	FILE *m;

	snprintf(f, sizeof(f), "/proc/%" PRIu32 "/maps", pid);
	m = fopen(f, "re");
	if (!m)
		return 0;
	while (!at && fgets(line, sizeof(line), m)) {
		unsigned long long lo, hi, off;
		int pos = 0;
		size_t len;

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &pos) < 3 ||
		    !pos || off)
			continue;
		len = strlen(line + pos);
		if (len && line[pos + len - 1] == '\n')
			line[pos + --len] = '\0';
		if (!strcmp(line + pos, path))
			at = lo;
	}
	fclose(m);
	return at;
}

/* The map's value for the file at path (its header checked), 0 or -errno. */
static int file_val(const char *path, uint32_t *pid, uint64_t *instance,
		    struct spancur_val *v)
{
	struct fay_shm_hdr h;
	uint64_t at;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (got != (ssize_t)sizeof(h) || h.magic != FAY_SHM_MAGIC ||
	    h.version != FAY_SHM_VERSION || h.state != FAY_SHM_LIVE)
		return -EINVAL;
	/* an older libfay has no table (0): nothing to read, not an error */
	if (!h.ncur || h.ncur & (h.ncur - 1) || h.cur_stride != FAY_CUR_CELL_SIZE ||
	    h.cur_off % 8 || h.cur_off < FAY_SHM_HDR_SIZE || h.cur_off > h.file_size ||
	    (uint64_t)h.ncur * FAY_CUR_CELL_SIZE > h.file_size - h.cur_off)
		return -ENOENT;
	*pid = h.pid;
	*instance = h.instance;
	at = mapped_at(h.pid, path);
	if (!at)
		return -ESRCH;
	*v = (struct spancur_val){ .cells = at + h.cur_off, .base = at, .mask = h.ncur - 1 };
	return 0;
}

static void scan(struct engine *e, struct engine_spancur *s)
{
	const char *dir = e->opts.shm_dir;
	char path[4096];
	struct dirent *d;
	DIR *dh;

	if (!dir || !*dir)
		dir = getenv("FAY_SHM_DIR");
	if (!dir || !*dir)
		dir = "/dev/shm";
	for (int i = 0; i < s->n; i++)
		s->p[i].seen = false;
	dh = opendir(dir);
	while (dh && (d = readdir(dh))) {
		size_t l = strlen(d->d_name);
		unsigned long long pid, inst;
		struct spancur_val v;
		uint32_t hpid = 0;
		uint64_t hinst = 0;
		int i;

		if (strncmp(d->d_name, FAY_SHM_PREFIX, strlen(FAY_SHM_PREFIX)) ||
		    l < strlen(FAY_SHM_SUFFIX) ||
		    strcmp(d->d_name + l - strlen(FAY_SHM_SUFFIX), FAY_SHM_SUFFIX) ||
		    sscanf(d->d_name + strlen(FAY_SHM_PREFIX), "%llu-%llx", &pid, &inst) != 2)
			continue;
		for (i = 0; i < s->n; i++)
			if (s->p[i].pid == pid && s->p[i].instance == inst)
				break;
		if (i < s->n) {
			/* known: still there while its process is */
			snprintf(path, sizeof(path), "/proc/%llu", pid);
			s->p[i].seen = !access(path, F_OK);
			continue;
		}
		if (s->n == SPANCUR_PROCS)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (file_val(path, &hpid, &hinst, &v) || hpid != pid || hinst != inst)
			continue;
		if (bmap_update(e->spancur, &hpid, &v, BPF_ANY))
			continue;
		s->p[s->n++] = (struct spancur_proc){ .pid = hpid, .instance = hinst, .seen = true };
	}
	if (dh)
		closedir(dh);
	for (int i = 0; i < s->n;) {
		if (s->p[i].seen) {
			i++;
			continue;
		}
		bmap_delete(e->spancur, &s->p[i].pid);
		s->p[i] = s->p[--s->n];
	}
}

bool engine_spancur_tick(struct engine *e)
{
	uint64_t now;

	if (!e->spancur || bmap_fd(e->spancur) < 0 || e->vm)
		return false;
	if (!e->spancur_st) {
		e->spancur_st = calloc(1, sizeof(*e->spancur_st));
		if (!e->spancur_st)
			return false;
	}
	now = clock_monotonic_ns();
	if (now >= e->spancur_st->next_ns) {
		scan(e, e->spancur_st);
		e->spancur_st->next_ns = now + SPANCUR_TICK_NS;
	}
	return true;
}

void engine_spancur_free(struct engine *e)
{
	free(e->spancur_st);
	e->spancur_st = NULL;
	bmap_free(e->spancur);
	e->spancur = NULL;
}
