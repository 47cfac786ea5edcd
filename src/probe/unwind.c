// SPDX-License-Identifier: MIT
/*
 * Unwind tables from .eh_frame (unwind.h), read with libdw's CFI reader:
 * every FDE's start from .eh_frame_hdr's sorted table, then each row of
 * it from dwarf_cfi_addrframe() (a row: the range where the rules hold),
 * turned into x86-64's few shapes (CFA = rsp/rbp + off, the return
 * address at CFA - 8, rbp saved at CFA + off or the caller's), anything
 * else marked for the walker to fall back to frame pointers.  libdw's
 * headers stay in this file.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/procroot.h"
#include "probe/unwind.h"

#define X86_RBP		6
#define X86_RSP		7
#define X86_RA		16
#define MAX_LOADS	16

/* A file's rows and its loadable segments (to find a mapping's bias). */
struct ufile {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int err;			/* 0, or why it has no rows (-errno) */
	struct unw_row *rows;
	size_t n;
	struct { uint64_t off, vaddr, filesz; } load[MAX_LOADS];
	int nload;
};

static struct ufile *files;
static size_t nfiles, capfiles;

/* a reason into why, and err */
#define WHY(err, ...) (snprintf(why, whylen, __VA_ARGS__), (err))

struct rows {
	struct unw_row *v;
	size_t n, cap;
	int err;
};

static void push(struct rows *r, uint64_t pc, const struct unw_row *x)
{
	struct unw_row *last = r->n ? &r->v[r->n - 1] : NULL;

	if (r->err)
		return;
	if (pc > UINT32_MAX) {
		r->err = -ERANGE;
		return;
	}
	if (last && last->pc == pc) {	/* an empty range before: replaced */
		r->n--;
		last = r->n ? &r->v[r->n - 1] : NULL;
	}
	if (last && last->kind == x->kind && last->cfa_off == x->cfa_off &&
	    last->rbp == x->rbp && last->rbp_off == x->rbp_off)
		return;		/* the same rules go on */
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 1024;
		struct unw_row *v = cap <= UNW_MAX_ROWS ? realloc(r->v, cap * sizeof(*v)) : NULL;

		if (!v) {
			r->err = -ENOMEM;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n] = *x;
	r->v[r->n++].pc = (uint32_t)pc;
}

/* A register's rule as CFA + *off: true if it is one */
static bool at_cfa(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	if (nops < 1 || nops > 2 || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	*off = 0;
	if (nops == 2) {
		if (ops[1].atom != DW_OP_plus_uconst)
			return false;
		*off = (int64_t)ops[1].number;
	}
	return true;
}

/* A register's rule as "saved at rsp + *off": true if it is one */
static bool at_rsp(Dwarf_Frame *f, int reg, int64_t *off)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;

	if (dwarf_frame_register(f, reg, mem, &ops, &nops) || !nops)
		return false;
	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa) {
		/* DW_CFA_expression: libdw pushes the CFA first, as DWARF
		 * says; the expression's value is the address */
		ops++;
		nops--;
	}
	if (nops != 1 || ops[0].atom != DW_OP_breg0 + X86_RSP)
		return false;
	*off = (int64_t)ops[0].number;
	return true;
}

/* The row of a signal frame's state f: x86-64 Linux's (CFA = [rsp + N],
 * rip saved at rsp + N + 8, rbp at rsp + M), else frame pointers */
static struct unw_row signal_row(Dwarf_Frame *f)
{
	struct unw_row x = { .kind = UNW_FP };
	Dwarf_Op *ops;
	size_t nops;
	int64_t ip, sp, bp;

	if (dwarf_frame_cfa(f, &ops, &nops) || nops != 2 || ops[0].atom != DW_OP_breg0 + X86_RSP ||
	    ops[1].atom != DW_OP_deref || !at_rsp(f, X86_RA, &ip) || !at_rsp(f, X86_RSP, &sp) ||
	    !at_rsp(f, X86_RBP, &bp) || (int64_t)ops[0].number != sp || ip != sp + 8 ||
	    sp < 0 || sp > 4096 || bp < 0 || bp > 4096 || sp % 8 || bp % 8)
		return x;
	x.kind = UNW_SIGNAL;
	x.cfa_off = (int32_t)sp;
	x.rbp = UNW_RBP_AT;
	x.rbp_off = (int16_t)bp;
	return x;
}

/* The row of the frame state f */
static struct unw_row row_of(Dwarf_Frame *f)
{
	struct unw_row x = { 0 };
	Dwarf_Op mem[3], *ops;
	size_t nops;
	bool signal = false;
	Dwarf_Addr s, e;
	int64_t off;

	x.kind = UNW_FP;
	if (dwarf_frame_info(f, &s, &e, &signal) < 0)
		return x;
	if (signal)
		return signal_row(f);
	if (dwarf_frame_cfa(f, &ops, &nops) || nops != 1 || ops[0].atom != DW_OP_bregx ||
	    (ops[0].number != X86_RSP && ops[0].number != X86_RBP) ||
	    (int64_t)ops[0].number2 < INT32_MIN || (int64_t)ops[0].number2 > INT32_MAX)
		return x;
	if (dwarf_frame_register(f, X86_RA, mem, &ops, &nops))
		return x;
	if (!nops) {
		if (ops)	/* undefined: the outermost frame (_start) */
			x.kind = UNW_END;
		return x;
	}
	if (!at_cfa(ops, nops, &off) || off != -8)
		return x;
	if (dwarf_frame_register(f, X86_RBP, mem, &ops, &nops))
		return x;
	if (!nops) {
		x.rbp = UNW_RBP_SAME;	/* same value, or never said (undefined) */
	} else if (at_cfa(ops, nops, &off) && off >= INT16_MIN && off <= INT16_MAX && off % 8 == 0) {
		x.rbp = UNW_RBP_AT;
		x.rbp_off = (int16_t)off;
	} else {
		x.rbp = UNW_RBP_LOST;
	}
	dwarf_frame_cfa(f, &ops, &nops);
	x.kind = ops[0].number == X86_RSP ? UNW_RSP : UNW_RBP;
	x.cfa_off = (int32_t)(int64_t)ops[0].number2;
	return x;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The FDEs' start addresses from .eh_frame_hdr (GNU ld's encodings:
 * table entries datarel sdata4 pairs), sorted, into *starts. */
static int fde_starts(Elf *elf, uint64_t **starts, size_t *n, const char *path, char *why,
		      size_t whylen)
{
	size_t nph;
	const unsigned char *p = NULL;
	uint64_t vaddr = 0, size = 0;

	if (elf_getphdrnum(elf, &nph))
		return WHY(-EINVAL, "%s: no program headers", path);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
							   ELF_T_BYTE);

			if (d && d->d_size >= 12) {
				p = d->d_buf;
				vaddr = ph.p_vaddr;
				size = d->d_size;
			}
		}
	}
	if (!p)
		return WHY(-ENOENT, "%s: no .eh_frame_hdr", path);
	/* version, eh_frame_ptr enc, fde_count enc, table enc */
	if (p[0] != 1 || (p[1] & 0x0f) != DW_EH_PE_sdata4 || p[2] != DW_EH_PE_udata4 ||
	    p[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return WHY(-ENOTSUP, "%s: .eh_frame_hdr encodings %#x %#x %#x",
			    path, p[1], p[2], p[3]);
	uint32_t cnt;

	memcpy(&cnt, p + 8, 4);
	if (cnt > (size - 12) / 8)
		return WHY(-EINVAL, "%s: .eh_frame_hdr: %u FDEs in %" PRIu64
			    " bytes", path, cnt, size);
	*starts = malloc((cnt + 1) * sizeof(**starts));
	if (!*starts)
		return -ENOMEM;
	for (uint32_t i = 0; i < cnt; i++) {
		int32_t loc;

		memcpy(&loc, p + 12 + 8 * (size_t)i, 4);
		(*starts)[i] = vaddr + (uint64_t)(int64_t)loc;
	}
	qsort(*starts, cnt, sizeof(**starts), cmp_u64);
	*n = cnt;
	return 0;
}

/* Build f's rows from the ELF at fd */
static int build(struct ufile *f, int fd, const char *path, char *why, size_t whylen)
{
	Elf *elf;
	Dwarf_CFI *cfi;
	uint64_t *starts = NULL, cur = 0;
	size_t n = 0, nph;
	struct rows r = { 0 };
	int err;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = WHY(-ENOEXEC, "%s: not an ELF file", path);
		goto out;
	}
	if (!elf_getphdrnum(elf, &nph))
		for (size_t i = 0; i < nph && f->nload < MAX_LOADS; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
				f->load[f->nload].off = ph.p_offset;
				f->load[f->nload].vaddr = ph.p_vaddr;
				f->load[f->nload++].filesz = ph.p_filesz;
			}
		}
	err = fde_starts(elf, &starts, &n, path, why, whylen);
	if (err)
		goto out;
	cfi = dwarf_getcfi_elf(elf);
	if (!cfi) {
		err = WHY(-ENOENT, "%s: no .eh_frame (%s)", path, dwarf_errmsg(-1));
		goto out;
	}
	for (size_t i = 0; i < n && !r.err; i++) {
		uint64_t next = i + 1 < n ? starts[i + 1] : UINT64_MAX;

		if (starts[i] > cur) {
			if (cur)	/* a gap: no information */
				push(&r, cur, &(struct unw_row){ .kind = UNW_NONE });
			cur = starts[i];
		}
		while (cur < next && !r.err) {
			Dwarf_Frame *fr;
			Dwarf_Addr s, e;
			bool sig;

			if (dwarf_cfi_addrframe(cfi, cur, &fr))
				break;
			if (dwarf_frame_info(fr, &s, &e, &sig) < 0 || e <= cur) {
				free(fr);
				break;
			}
			struct unw_row x = row_of(fr);

			push(&r, cur, &x);
			free(fr);
			cur = e;
		}
	}
	if (cur)
		push(&r, cur, &(struct unw_row){ .kind = UNW_NONE });
	dwarf_cfi_end(cfi);
	if (r.err || !r.n) {
		err = r.err == -ERANGE ? WHY(-ERANGE, "%s: addresses past 4 GiB", path)
		      : r.err ? r.err : WHY(-ENOENT, "%s: no FDE", path);
		free(r.v);
		goto out;
	}
	f->rows = r.v;
	f->n = r.n;
out:
	free(starts);
	if (elf)
		elf_end(elf);
	return err;
}

/* The cached file for fd (built now if new), or NULL on ENOMEM */
static struct ufile *lookup(int fd, const char *path, char *why, size_t whylen)
{
	struct stat st;
	struct ufile *f;

	if (fstat(fd, &st))
		return NULL;
	for (size_t i = 0; i < nfiles; i++) {
		f = &files[i];
		if (f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
		    f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			if (f->err)
				snprintf(why, whylen, "%s: no rows (%s, as before)", path,
					 strerror(-f->err));
			return f;
		}
	}
	if (nfiles == capfiles) {
		size_t cap = capfiles ? 2 * capfiles : 32;
		struct ufile *v = realloc(files, cap * sizeof(*v));

		if (!v)
			return NULL;
		files = v;
		capfiles = cap;
	}
	f = &files[nfiles++];
	memset(f, 0, sizeof(*f));
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime = st.st_mtim;
	f->err = build(f, fd, path, why, whylen);
	return f;
}

int unwind_file_rows(int fd, const char *path, const struct unw_row **rows, size_t *n,
		     char *why, size_t whylen)
{
	struct ufile *f = lookup(fd, path, why, whylen);

	if (!f)
		return -ENOMEM;
	if (f->err)
		return f->err;
	*rows = f->rows;
	*n = f->n;
	return 0;
}

void unwind_cache_free(void)
{
	for (size_t i = 0; i < nfiles; i++)
		free(files[i].rows);
	free(files);
	files = NULL;
	nfiles = capfiles = 0;
}

/* One executable file mapping of a process */
struct umap {
	uint64_t lo, hi, bias;
	const struct ufile *f;
};

/* The bias of a mapping at lo of file offset off in f, or false */
static bool bias_of(const struct ufile *f, uint64_t lo, uint64_t off, uint64_t *bias)
{
	for (int i = 0; i < f->nload; i++)
		if (off >= f->load[i].off && off < f->load[i].off + f->load[i].filesz) {
			*bias = lo - (f->load[i].vaddr + (off - f->load[i].off));
			return true;
		}
	return false;
}

/* each_exec_map()'s state: a callback for the mappings but skip's */
struct each {
	const char *skip;
	int (*fn)(void *arg, uint64_t lo, uint64_t hi, uint64_t off, const char *file);
	void *arg;
};

static int each_one(const char *line, unsigned long long lo, unsigned long long hi,
		    unsigned long long off, const char *file, void *arg)
{
	const struct each *e = arg;
	size_t n = strlen(file), k = e->skip ? strlen(e->skip) : 0;

	(void)line;
	if (k && n >= k && !strcmp(file + n - k, e->skip))
		return 0;
	return e->fn(e->arg, lo, hi, off, file);
}

/* Each executable file mapping of pid's /proc/PID/maps but skip's:
 * fn(arg, lo, hi, off, file) until it returns nonzero (returned).
 * -errno if the maps cannot be read. */
static int each_exec_map(pid_t pid, const char *skip,
			 int (*fn)(void *arg, uint64_t lo, uint64_t hi, uint64_t off,
				   const char *file), void *arg)
{
	struct each e = { skip, fn, arg };

	return proc_each_exec_map(pid, each_one, &e);
}

/* FNV-1a of a mapping into *(uint64_t *)arg */
static int sig_add(void *arg, uint64_t lo, uint64_t hi, uint64_t off, const char *file)
{
	uint64_t *h = arg, v[3] = { lo, hi, off };
	const unsigned char *p = (const void *)v;

	for (size_t i = 0; i < sizeof(v); i++)
		*h = (*h ^ p[i]) * 0x100000001b3ull;
	for (p = (const void *)file; *p; p++)
		*h = (*h ^ *p) * 0x100000001b3ull;
	return 0;
}

uint64_t unwind_process_sig(pid_t pid, const char *skip)
{
	uint64_t h = 0xcbf29ce484222325ull;

	return each_exec_map(pid, skip, sig_add, &h) ? 0 : h | 1;
}

/* The process's modules so far, for each_exec_map() */
struct pmods {
	pid_t pid;
	struct umap maps[UNW_MAX_MODS];
	size_t nm, nr;
	uint64_t sig;
};

static int mod_add(void *arg, uint64_t lo, uint64_t hi, uint64_t off, const char *file)
{
	struct pmods *pm = arg;
	struct ufile *f;
	char mf[96], w[256];
	int ffd;

	sig_add(&pm->sig, lo, hi, off, file);
	if (pm->nm == UNW_MAX_MODS)
		return 0;
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pm->pid, lo, hi);
	ffd = open(mf, O_RDONLY | O_CLOEXEC);
	if (ffd < 0)
		return 0;	/* gone, or not ours to read: frame pointers */
	f = lookup(ffd, file, w, sizeof(w));
	close(ffd);
	if (!f || f->err || !bias_of(f, lo, off, &pm->maps[pm->nm].bias))
		return 0;
	if (pm->nm && lo < pm->maps[pm->nm - 1].hi)
		return 0;	/* /proc/PID/maps is sorted: never */
	pm->maps[pm->nm].lo = lo;
	pm->maps[pm->nm].hi = hi;
	pm->maps[pm->nm].f = f;
	pm->nr += f->n;
	pm->nm++;
	return 0;
}

int unwind_process_memfd(pid_t pid, const char *skip, unsigned *nmods, unsigned *nrows,
			 uint64_t *sig, char *why, size_t whylen)
{
	struct pmods *pm = calloc(1, sizeof(*pm));
	size_t nm, nr, len, at;
	unsigned char *blob;
	int fd, err;

	if (!pm)
		return -ENOMEM;
	pm->pid = pid;
	pm->sig = 0xcbf29ce484222325ull;
	err = each_exec_map(pid, skip, mod_add, pm);
	if (err) {
		free(pm);
		return WHY(err, "/proc/%d/maps: %s", (int)pid, strerror(-err));
	}
	nm = pm->nm;
	nr = pm->nr;
	*sig = pm->sig | 1;
	if (nr > UNW_MAX_ROWS) {
		free(pm);
		return WHY(-E2BIG, "process %d: %zu rows", (int)pid, nr);
	}
	len = sizeof(struct unw_hdr) + nm * sizeof(struct unw_mod) + nr * sizeof(struct unw_row);
	fd = memfd_create("fay-unwind", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		free(pm);
		return WHY(-errno, "memfd_create: %s", strerror(errno));
	}
	if (ftruncate(fd, (off_t)len)) {
		err = WHY(-errno, "memfd of %zu bytes: %s", len, strerror(errno));
		goto fail;
	}
	blob = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (blob == MAP_FAILED) {
		err = WHY(-errno, "mmap of the memfd: %s", strerror(errno));
		goto fail;
	}
	struct unw_hdr h = { UNW_MAGIC, UNW_VERSION, (uint32_t)nm, (uint32_t)nr, len };
	memcpy(blob, &h, sizeof(h));
	at = 0;
	for (size_t i = 0; i < nm; i++) {
		struct unw_mod m = { pm->maps[i].lo, pm->maps[i].hi, pm->maps[i].bias, (uint32_t)at,
				     (uint32_t)pm->maps[i].f->n };

		memcpy(blob + sizeof(h) + i * sizeof(m), &m, sizeof(m));
		memcpy(blob + sizeof(h) + nm * sizeof(m) + at * sizeof(struct unw_row),
		       pm->maps[i].f->rows, pm->maps[i].f->n * sizeof(struct unw_row));
		at += pm->maps[i].f->n;
	}
	err = unw_check(blob, len, why, whylen);
	munmap(blob, len);
	if (err)
		goto fail;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		err = WHY(-errno, "sealing the memfd: %s", strerror(errno));
		goto fail;
	}
	*nmods = (unsigned)nm;
	*nrows = (unsigned)nr;
	free(pm);
	return fd;
fail:
	free(pm);
	close(fd);
	return err;
}
