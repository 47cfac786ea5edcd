// SPDX-License-Identifier: MIT
/*
 * ELF symbol resolution with libelf.  Addresses become file offsets through
 * the PT_LOAD program headers (uprobes are placed by inode + offset, so
 * this works alike for executables, PIEs and shared libraries).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/demangle.h"
#include "probe/elfsym.h"

int glob_match(const char *pattern, const char *name)
{
	return !pattern || !*pattern || !fnmatch(pattern, name, 0);
}

/* ---- finding a library ---------------------------------------------------- */

static bool is_file(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* Does soname answer to the short name?  "libc" matches "libc.so" and
 * "libc.so.6"; a name with ".so" must match exactly or as a prefix up to
 * a version dot. */
bool elf_lib_matches(const char *want, const char *soname)
{
	size_t n = strlen(want);

	if (strncmp(soname, want, n))
		return false;
	if (!strstr(want, ".so"))
		return !strncmp(soname + n, ".so", 3) &&
		       (soname[n + 3] == '\0' || soname[n + 3] == '.');
	return soname[n] == '\0' || soname[n] == '.';
}

#define LDCACHE_MAGIC "glibc-ld.so.cache1.1"
#define LDCACHE_X8664 0x0303	/* FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 */

struct ldcache_hdr {
	char magic[20];
	uint32_t nlibs;
	uint32_t len_strings;
	uint8_t flags, pad[3];
	uint32_t ext_offset;
	uint32_t unused[3];
};

struct ldcache_entry {
	int32_t flags;
	uint32_t key, value;
	uint32_t osversion;
	uint64_t hwcap;
};

/* root's /etc/ld.so.cache in glibc's "new" format: entries point into
 * the string table by file offset; the paths found are under root. */
static int ldcache_lookup(const char *root, const char *name, char *path, size_t len)
{
	char fn[4200];
	const struct ldcache_hdr *h;
	struct stat st;
	void *map;
	int fd, err = -ENOENT;

	snprintf(fn, sizeof(fn), "%s/etc/ld.so.cache", root);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*h)) {
		close(fd);
		return -ENOENT;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	h = map;
	if (!memcmp(h->magic, LDCACHE_MAGIC, 20) &&
	    sizeof(*h) + (uint64_t)h->nlibs * sizeof(struct ldcache_entry) <=
	    (uint64_t)st.st_size) {
		const struct ldcache_entry *e = (const void *)(h + 1);

		for (uint32_t i = 0; i < h->nlibs; i++) {
			const char *key, *val;

			if (e[i].key >= st.st_size || e[i].value >= st.st_size ||
			    (e[i].flags & 0xffff) != LDCACHE_X8664)
				continue;
			key = (const char *)map + e[i].key;
			val = (const char *)map + e[i].value;
			if (!memchr(key, 0, st.st_size - e[i].key) ||
			    !memchr(val, 0, st.st_size - e[i].value))
				continue;
			snprintf(path, len, "%s%s", root, val);
			if (elf_lib_matches(name, key) && is_file(path)) {
				err = 0;
				break;
			}
		}
	}
	munmap(map, st.st_size);
	return err;
}

static int dir_lookup(const char *root, const char *name, char *path, size_t len)
{
	static const char *const dirs[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
		"/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib",
	};

	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		static const char *const sfx[] = { "", ".so", ".so.6", ".so.1",
						   ".so.0", ".so.2", ".so.3" };

		for (size_t s = 0; s < sizeof(sfx) / sizeof(sfx[0]); s++) {
			snprintf(path, len, "%s%s/%s%s", root, dirs[d], name, sfx[s]);
			if (is_file(path))
				return 0;
		}
	}
	return -ENOENT;
}

/* $PATH (root ""), or the usual program directories under root. */
static int path_lookup(const char *root, const char *name, char *path, size_t len)
{
	const char *env = *root ? NULL : getenv("PATH");
	char *dup, *tok, *save = NULL;
	int err = -ENOENT;

	dup = strdup(env ? env : "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
	if (!dup)
		return -ENOMEM;
	for (tok = strtok_r(dup, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		snprintf(path, len, "%s%s/%s", root, tok, name);
		if (is_file(path) && !access(path, X_OK)) {
			err = 0;
			break;
		}
	}
	free(dup);
	return err;
}

int elf_resolve_path(const char *name, char *path, size_t len)
{
	if (!name || !*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		if (!is_file(name))
			return -ENOENT;
		if (!realpath(name, path) || strlen(path) >= len)
			snprintf(path, len, "%s", name);
		return 0;
	}
	return elf_resolve_under("", name, path, len);
}

int elf_resolve_under(const char *root, const char *name, char *path, size_t len)
{
	if (!name || !*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		snprintf(path, len, "%s%s", root, name);
		return is_file(path) ? 0 : -ENOENT;
	}
	if (!strncmp(name, "lib", 3) &&
	    (!ldcache_lookup(root, name, path, len) || !dir_lookup(root, name, path, len)))
		return 0;
	return path_lookup(root, name, path, len);
}

/* ---- symbols ------------------------------------------------------------- */

struct elf_file {
	int fd;
	Elf *e;
};

static int elf_open(const char *path, struct elf_file *f)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return -errno;
	f->e = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (!f->e || elf_kind(f->e) != ELF_K_ELF) {
		if (f->e)
			elf_end(f->e);
		close(f->fd);
		return -ENOEXEC;
	}
	return 0;
}

static void elf_close(struct elf_file *f)
{
	elf_end(f->e);
	close(f->fd);
}

/* Through the PT_LOAD segments: virtual address x -> file offset
 * (to_off), or file offset x -> virtual address (an executable one). */
static int seg_map(Elf *e, uint64_t x, bool to_off, uint64_t *out)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		uint64_t from, span;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    (!to_off && !(ph.p_flags & PF_X)))
			continue;
		from = to_off ? ph.p_vaddr : ph.p_offset;
		span = to_off ? ph.p_memsz : ph.p_filesz;
		if (x >= from && x < from + span) {
			*out = to_off ? x - ph.p_vaddr + ph.p_offset : x - ph.p_offset + ph.p_vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

static int vaddr_to_off(Elf *e, uint64_t addr, uint64_t *off)
{
	return seg_map(e, addr, true, off);
}

/* foreach_sym_type()'s type for every named symbol, undefined ones
 * (imports) too */
#define ANY_SYM		(-1)

/* Every defined symbol of type (STT_FUNC, STT_GNU_IFUNC) to cb. */
static int foreach_sym_type(Elf *e, int type,
			    int (*cb)(const char *, uint64_t, uint64_t, void *), void *arg)
{
	static const Elf64_Word types[] = { SHT_SYMTAB, SHT_DYNSYM };

	for (size_t t = 0; t < 2; t++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != types[t] ||
			    !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			if (!d)
				continue;
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym s;
				const char *name;
				int r;

				if (!gelf_getsym(d, (int)i, &s) ||
				    (type != ANY_SYM && (GELF_ST_TYPE(s.st_info) != type ||
							 s.st_shndx == SHN_UNDEF || !s.st_value)))
					continue;
				name = elf_strptr(e, sh.sh_link, s.st_name);
				if (!name || !*name)
					continue;
				r = cb(name, s.st_value, s.st_size, arg);
				if (r)
					return r;
			}
		}
	}
	return 0;
}

static int foreach_sym(Elf *e, int (*cb)(const char *, uint64_t, uint64_t, void *),
		       void *arg)
{
	return foreach_sym_type(e, STT_FUNC, cb, arg);
}

int elf_foreach_func(const char *path,
		     int (*cb)(const char *, uint64_t, uint64_t, void *), void *arg)
{
	struct elf_file f;
	int err = elf_open(path, &f);

	if (err)
		return err;
	err = foreach_sym(f.e, cb, arg);
	elf_close(&f);
	return err;
}

int elf_foreach_ifunc(const char *path,
		      int (*cb)(const char *, uint64_t, uint64_t, void *), void *arg)
{
	struct elf_file f;
	int err = elf_open(path, &f);

	if (err)
		return err;
	err = foreach_sym_type(f.e, STT_GNU_IFUNC, cb, arg);
	elf_close(&f);
	return err;
}

struct off_walk {
	Elf *e;
	int (*cb)(const char *, uint64_t, uint64_t, void *);
	void *arg;
};

static int off_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct off_walk *w = arg;
	uint64_t off;

	if (vaddr_to_off(w->e, addr, &off))
		return 0;	/* not in a loaded segment */
	return w->cb(name, off, size, w->arg);
}

int elf_foreach_func_offset(const char *path,
			    int (*cb)(const char *, uint64_t, uint64_t, void *),
			    void *arg)
{
	struct elf_file f;
	struct off_walk w = { .cb = cb, .arg = arg };
	int err = elf_open(path, &f);

	if (err)
		return err;
	w.e = f.e;
	err = foreach_sym(f.e, off_cb, &w);
	elf_close(&f);
	return err;
}

struct find_sym {
	const char *want;
	uint64_t addr;
};

static int find_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct find_sym *fs = arg;
	/* .symtab may carry "read@@GLIBC_2.2.5" style names. */
	size_t n = strlen(fs->want);

	if (strncmp(name, fs->want, n) || (name[n] && name[n] != '@'))
		return 0;
	fs->addr = addr;
	return 1;
}

/* A C++ function by its demangled name: with a parameter list the whole
 * name ("ns::f(int)"), else the name without one ("ns::f"), which must
 * then name one function (one address: not several overloads). */
struct cxx_sym {
	const char *want;
	bool params;
	uint64_t addr;
	unsigned int n;		/* functions (addresses) of that name */
};

static int cxx_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct cxx_sym *cs = arg;
	char *d;

	(void)size;
	if (strchr(name, '.'))	/* a part or a clone of one: "f.cold", "f.isra.0" */
		return 0;
	d = sym_demangle(name, cs->params);
	if (d && !strcmp(d, cs->want) && (!cs->n || cs->addr != addr)) {
		cs->addr = addr;
		cs->n++;
	}
	free(d);
	return 0;
}

int elf_func_offset(const char *path, const char *sym, uint64_t *off)
{
	struct find_sym fs = { .want = sym };
	struct cxx_sym cs = { .want = sym, .params = strchr(sym, '(') != NULL };
	struct elf_file f;
	int err = elf_open(path, &f);

	if (err)
		return err;
	/* an IFUNC (the default version: memcpy@@GLIBC_2.14 beside the old
	 * memcpy@GLIBC_2.2.5 function): the implementation this CPU runs */
	if (foreach_sym_type(f.e, STT_GNU_IFUNC, find_cb, &fs) == 1)
		err = elf_ifunc_target(path, sym, &fs.addr);
	else if (foreach_sym(f.e, find_cb, &fs) == 1)
		;
	else if (!strpbrk(sym, ":(<~") || (err = foreach_sym(f.e, cxx_cb, &cs)))
		err = err ? err : -ENOENT;
	else if (cs.n != 1)
		err = cs.n ? -ENOTUNIQ : -ENOENT;
	else
		fs.addr = cs.addr;
	if (!err)
		err = vaddr_to_off(f.e, fs.addr, off);
	elf_close(&f);
	return err;
}

struct at_sym {
	uint64_t addr, size, next;	/* next: the lowest symbol above addr */
};

static int at_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct at_sym *a = arg;

	(void)name;
	if (addr == a->addr && size && !a->size)
		a->size = size;
	if (addr > a->addr && addr < a->next)
		a->next = addr;
	return 0;
}

int elf_func_at(const char *path, uint64_t off, uint64_t *size, uint64_t *room)
{
	struct at_sym a = { 0, 0, UINT64_MAX };
	struct elf_file f;
	uint64_t start;
	int err = elf_open(path, &f);

	if (err)
		return err;
	err = seg_map(f.e, off, false, &a.addr);
	if (!err)
		err = foreach_sym(f.e, at_cb, &a);
	elf_close(&f);
	if (err)
		return err;
	if (a.size) {
		/* up to the next function, within the 16-byte alignment gcc
		 * pads to */
		*size = a.size;
		*room = a.next - a.addr < 16 ? a.next - a.addr : 16;
		if (*room < *size)
			*room = *size;
		return 0;
	}
	/* no symbol (an IFUNC's implementation in a stripped library) */
	err = elf_fde_extent(path, a.addr, &start, size);
	if (!err && start != a.addr)
		err = -ENOENT;
	*room = *size;
	return err ? err : 1;
}

/* ---- C++ exceptions -------------------------------------------------------------- */

static int throws_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	static const char *const names[] = {
		"__cxa_throw", "__cxa_rethrow", "__gxx_personality_v0", "_Unwind_RaiseException",
	};
	size_t n = strcspn(name, "@");

	(void)addr;
	(void)size;
	(void)arg;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncmp(name, names[i], n))
			return 1;
	return 0;
}

int elf_cxx_exceptions(const char *path)
{
	struct elf_file f;
	int err = elf_open(path, &f);

	if (err)
		return err;
	err = foreach_sym_type(f.e, ANY_SYM, throws_cb, NULL);
	elf_close(&f);
	return err;
}

/* ---- what kind of file ------------------------------------------------------- */

/* Its DT_FLAGS_1 has DF_1_PIE, and whether it has a DT_SONAME. */
static void dyn_flags(Elf *e, bool *pie, bool *soname)
{
	Elf_Scn *scn = NULL;

	*pie = *soname = false;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			if (!gelf_getdyn(d, (int)i, &dyn))
				break;
			if (dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_PIE))
				*pie = true;
			else if (dyn.d_tag == DT_SONAME)
				*soname = true;
		}
	}
}

int elf_is_program(const char *path)
{
	struct elf_file f;
	GElf_Ehdr eh;
	bool pie, soname, interp = false;
	size_t n = 0;
	int err = elf_open(path, &f);

	if (err)
		return err;
	if (!gelf_getehdr(f.e, &eh) || elf_getphdrnum(f.e, &n)) {
		elf_close(&f);
		return -ENOEXEC;
	}
	if (eh.e_type != ET_DYN) {
		elf_close(&f);
		return eh.e_type == ET_EXEC ? 1 : -ENOEXEC;
	}
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(f.e, (int)i, &ph) && ph.p_type == PT_INTERP)
			interp = true;
	}
	dyn_flags(f.e, &pie, &soname);
	elf_close(&f);
	/* libc.so.6 has a PT_INTERP too (it runs as a program), and a
	 * soname; a PIE linked before DF_1_PIE existed has no soname */
	return pie || (interp && !soname);
}

/* ---- USDT ------------------------------------------------------------------ */

static int section_addr(Elf *e, const char *name, uint64_t *addr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(e, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(e, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name)) {
			*addr = sh.sh_addr;
			return 0;
		}
	}
	return -ENOENT;
}

/* One note: pc, base, semaphore (3 x u64), then provider, name, args. */
static int usdt_note(Elf *e, const char *desc, size_t len, uint64_t base_sec,
		     bool have_base, struct usdt_site *s)
{
	uint64_t pc, base, sema;
	const char *p = desc + 24, *end = desc + len;
	const char *parts[3];

	if (len < 27)
		return -EINVAL;
	memcpy(&pc, desc, 8);
	memcpy(&base, desc + 8, 8);
	memcpy(&sema, desc + 16, 8);
	for (int i = 0; i < 3; i++) {
		const char *z = memchr(p, 0, end - p);

		if (!z)
			return -EINVAL;
		parts[i] = p;
		p = z + 1;
	}
	memset(s, 0, sizeof(*s));
	snprintf(s->provider, sizeof(s->provider), "%s", parts[0]);
	snprintf(s->name, sizeof(s->name), "%s", parts[1]);
	snprintf(s->args, sizeof(s->args), "%s", parts[2]);
	/* Prelink may have moved the binary: .stapsdt.base tells by how much. */
	if (have_base) {
		pc += base_sec - base;
		if (sema)
			sema += base_sec - base;
	}
	s->pc = pc;
	if (vaddr_to_off(e, pc, &s->offset))
		return -EINVAL;
	if (sema && vaddr_to_off(e, sema, &s->sema_offset))
		s->sema_offset = 0;
	return 0;
}

int elf_foreach_usdt(const char *path,
		     int (*cb)(const struct usdt_site *, void *), void *arg)
{
	struct elf_file f;
	Elf_Scn *scn = NULL;
	uint64_t base_sec = 0;
	bool have_base;
	int err = elf_open(path, &f), r = 0;

	if (err)
		return err;
	have_base = !section_addr(f.e, ".stapsdt.base", &base_sec);
	while (!r && (scn = elf_nextscn(f.e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		while (!r && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			struct usdt_site s;
			const char *owner = (const char *)d->d_buf + noff;

			if (nh.n_type != 3 || nh.n_namesz != 8 ||
			    memcmp(owner, "stapsdt", 8))
				continue;
			if (usdt_note(f.e, (const char *)d->d_buf + doff,
				      nh.n_descsz, base_sec, have_base, &s))
				continue;
			r = cb(&s, arg);
		}
	}
	elf_close(&f);
	return r;
}
