// SPDX-License-Identifier: MIT
/*
 * IFUNC symbols (STT_GNU_IFUNC: glibc's strlen, memcpy, memset, strcmp,
 * issue 19 item 4).  The symbol is the resolver, which the loader runs
 * once to pick an implementation for this CPU (__strlen_avx2,
 * __memmove_avx_unaligned_erms, ...); probing the symbol's address
 * probes the resolver, which no program calls.
 *
 * Which implementation: the one this CPU selects, found by running the
 * resolver in fay's own process (dlsym() on a library fay has loaded
 * returns what the resolver chose), on the same machine and CPU as the
 * traced processes, so the same one they run (GLIBC_TUNABLES that mask
 * CPU features in a traced process would select another: not followed).
 * One site rather than every candidate: a query counts each call once,
 * and the candidates have no symbols in a stripped libc to find them by.
 *
 * Its size (the inline patcher needs it): the implementation has no
 * symbol in a stripped library, so the extent comes from the call frame
 * information, the FDE that .eh_frame_hdr's table gives for its address
 * (glibc's assembly functions carry CFI).  The files are read with
 * <elf.h> and pread(), without libelf (src/probe/elfsym.c wraps that).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe/elfsym.h"

#define MAX_PHDRS	64

struct efile {
	int fd;
	Elf64_Phdr ph[MAX_PHDRS];
	int nph;
};

static int efile_open(const char *path, struct efile *f)
{
	Elf64_Ehdr eh;

	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return -errno;
	if (pread(f->fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > MAX_PHDRS ||
	    pread(f->fd, f->ph, eh.e_phnum * sizeof(Elf64_Phdr), (off_t)eh.e_phoff) !=
	    (ssize_t)(eh.e_phnum * sizeof(Elf64_Phdr))) {
		close(f->fd);
		return -ENOEXEC;
	}
	f->nph = eh.e_phnum;
	return 0;
}

/* n bytes at vaddr (in a PT_LOAD segment's file part) into buf. */
static int read_at(const struct efile *f, uint64_t vaddr, void *buf, size_t n)
{
	for (int i = 0; i < f->nph; i++) {
		const Elf64_Phdr *p = &f->ph[i];

		if (p->p_type == PT_LOAD && vaddr >= p->p_vaddr &&
		    vaddr + n <= p->p_vaddr + p->p_filesz)
			return pread(f->fd, buf, n, (off_t)(p->p_offset + vaddr - p->p_vaddr)) ==
			       (ssize_t)n ? 0 : -EIO;
	}
	return -ENOENT;
}

/* .eh_frame_hdr's sorted table (DW_EH_PE_datarel | sdata4 pairs, what
 * every x86-64 linker writes), binary searched for the last entry at or
 * below vaddr; its FDE's pc_begin (pcrel | sdata4) and pc_range. */
int elf_fde_extent(const char *path, uint64_t vaddr, uint64_t *start, uint64_t *size)
{
	struct efile f;
	uint64_t hdr = 0, fde;
	uint8_t h[4];
	int32_t cnt_ptr[2], ent[2], pc[2];
	uint32_t lo, hi, n;
	int err;

	err = efile_open(path, &f);
	if (err)
		return err;
	err = -ENOENT;
	for (int i = 0; i < f.nph; i++)
		if (f.ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = f.ph[i].p_vaddr;
	/* version 1; eh_frame_ptr and fde_count sdata4/udata4; table 0x3b */
	if (!hdr || read_at(&f, hdr, h, 4) || h[0] != 1 || (h[1] & 0x0f) != 0x0b ||
	    (h[2] & 0x0f) != 0x03 || h[3] != 0x3b || read_at(&f, hdr + 4, cnt_ptr, 8))
		goto out;
	n = (uint32_t)cnt_ptr[1];
	lo = 0;
	hi = n;
	while (lo < hi) {	/* the first entry above vaddr */
		uint32_t mid = lo + (hi - lo) / 2;

		if (read_at(&f, hdr + 12 + (uint64_t)mid * 8, ent, 8))
			goto out;
		if (hdr + (uint64_t)(int64_t)ent[0] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || read_at(&f, hdr + 12 + (uint64_t)(lo - 1) * 8, ent, 8))
		goto out;
	fde = hdr + (uint64_t)(int64_t)ent[1];
	/* length, CIE pointer, pc_begin (pcrel sdata4), pc_range (sdata4) */
	if (read_at(&f, fde + 8, pc, 8) ||
	    fde + 8 + (uint64_t)(int64_t)pc[0] != hdr + (uint64_t)(int64_t)ent[0] ||
	    vaddr >= fde + 8 + (uint64_t)(int64_t)pc[0] + (uint32_t)pc[1])
		goto out;	/* another encoding, or vaddr in no FDE */
	*start = fde + 8 + (uint64_t)(int64_t)pc[0];
	*size = (uint32_t)pc[1];
	err = 0;
out:
	close(f.fd);
	return err;
}

int elf_ifunc_target(const char *path, const char *sym, uint64_t *vaddr)
{
	void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	void *fn;
	int err = 0;

	if (!h)
		return -ENXIO;	/* not loaded in fay: its resolver is not run here */
	fn = dlsym(h, sym);
	if (!fn || dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || (uintptr_t)fn < lm->l_addr)
		err = -ENOENT;
	else
		*vaddr = (uint64_t)(uintptr_t)fn - lm->l_addr;
	dlclose(h);
	return err;
}

int elf_jumps_into(const char *path, uint64_t off, uint64_t len, uint64_t *from)
{
	const Elf64_Phdr *seg = NULL;
	struct efile f;
	uint8_t *b;
	uint64_t lo, n;
	int err = efile_open(path, &f);

	if (err)
		return err;
	for (int i = 0; i < f.nph; i++)
		if (f.ph[i].p_type == PT_LOAD && (f.ph[i].p_flags & PF_X) &&
		    off >= f.ph[i].p_offset && off < f.ph[i].p_offset + f.ph[i].p_filesz)
			seg = &f.ph[i];
	if (!seg || seg->p_filesz > (256u << 20)) {
		close(f.fd);
		return -ENOENT;
	}
	lo = seg->p_offset;
	n = seg->p_filesz;
	b = malloc(n);
	if (!b || pread(f.fd, b, n, (off_t)lo) != (ssize_t)n) {
		free(b);
		close(f.fd);
		return -EIO;
	}
	close(f.fd);
	err = 0;
	/* every byte position: what a jump or call there would target */
	for (uint64_t i = 0; i + 2 <= n && !err; i++) {
		uint64_t at = lo + i, t[2];
		int nt = 0;

		if ((b[i] == 0xe8 || b[i] == 0xe9) && i + 5 <= n) {
			int32_t r;

			memcpy(&r, b + i + 1, 4);
			t[nt++] = at + 5 + (uint64_t)(int64_t)r;
		}
		if (b[i] == 0x0f && (b[i + 1] & 0xf0) == 0x80 && i + 6 <= n) {
			int32_t r;

			memcpy(&r, b + i + 2, 4);
			t[nt++] = at + 6 + (uint64_t)(int64_t)r;
		}
		if (b[i] == 0xeb || (b[i] & 0xf0) == 0x70 || (b[i] >= 0xe0 && b[i] <= 0xe3))
			t[nt++] = at + 2 + (uint64_t)(int64_t)(int8_t)b[i + 1];
		for (int k = 0; k < nt; k++)
			if (t[k] > off && t[k] < off + len && (at < off || at >= off + len)) {
				*from = at;
				err = 1;
			}
	}
	free(b);
	return err;
}
