// SPDX-License-Identifier: MIT
/* Names for the frames of walked stacks, folded (stacksym.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe/demangle.h"
#include "probe/elfsym.h"
#include "probe/stacksym.h"

struct sym {
	uint64_t lo, size;	/* kernel: address; files: file offset */
	char *name;
};

struct symtab {
	struct sym *v;
	size_t n, cap;
};

struct sfile {
	char *path;
	struct symtab t;
};

struct umap {
	uint64_t start, end, pgoff;
	struct sfile *f;	/* NULL: no file (anonymous, [vdso] ...) */
	char label[64];		/* base name, or "[vdso]" */
};

struct uproc {
	pid_t pid;
	struct umap *v;
	size_t n;
	int reads;		/* of its maps after a miss, at most
				 * STACKSYM_REREADS */
	time_t first;		/* first seen (CLOCK_MONOTONIC, s) */
};

#define STACKSYM_REREADS	4

struct stacksym {
	bool kloaded;
	struct symtab k;
	struct sfile **files;
	size_t nfiles;
	struct uproc *procs;
	size_t nprocs;
};

struct stacksym *stacksym_new(void)
{
	return calloc(1, sizeof(struct stacksym));
}

static void symtab_free(struct symtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
}

void stacksym_free(struct stacksym *s)
{
	if (!s)
		return;
	symtab_free(&s->k);
	for (size_t i = 0; i < s->nfiles; i++) {
		symtab_free(&s->files[i]->t);
		free(s->files[i]->path);
		free(s->files[i]);
	}
	free(s->files);
	for (size_t i = 0; i < s->nprocs; i++)
		free(s->procs[i].v);
	free(s->procs);
	free(s);
}

/* Add a symbol; the name is cut at '@' (.symtab's "read@@GLIBC_2.2.5"),
 * a C++ name demangled without its parameters ("ns::C::f": one frame
 * name per function, as flame graphs want) and a ';' (the folded
 * separator) becomes ':'. */
static int symtab_add(struct symtab *t, uint64_t lo, uint64_t size, const char *name)
{
	size_t n = strcspn(name, "@");
	char *c;

	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct sym *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	c = sym_demangle(name, false);
	if (!c)
		c = strndup(name, n);
	if (!c)
		return -ENOMEM;
	for (char *p = c; (p = strchr(p, ';')); )
		*p = ':';
	t->v[t->n++] = (struct sym){ lo, size, c };
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The symbol holding x: the last one starting at or before it, within
 * its size when it has one.  NULL when none. */
static const struct sym *symtab_find(const struct symtab *t, uint64_t x)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->v[mid].lo <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* among symbols at one address, any sized one that holds x */
	for (size_t i = lo; i-- > 0 && t->v[i].lo == t->v[lo - 1].lo; )
		if (!t->v[i].size || x < t->v[i].lo + t->v[i].size)
			return &t->v[i];
	return NULL;
}

/* ---- kernel ------------------------------------------------------------------ */

static void load_kallsyms(struct stacksym *s)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];

	s->kloaded = true;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &a, &type, name) != 3 || !a)
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (symtab_add(&s->k, a, 0, name))
			break;
	}
	fclose(f);
	qsort(s->k.v, s->k.n, sizeof(*s->k.v), sym_cmp);
}

/* ---- user --------------------------------------------------------------------- */

static int file_cb(const char *name, uint64_t off, uint64_t size, void *arg)
{
	return symtab_add(arg, off, size, name);
}

static struct sfile *file_get(struct stacksym *s, const char *path, const char *alt)
{
	struct sfile *f, **v;

	for (size_t i = 0; i < s->nfiles; i++)
		if (!strcmp(s->files[i]->path, path))
			return s->files[i];
	v = realloc(s->files, (s->nfiles + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->files = v;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return NULL;
	}
	/* the path as the process sees it may not be ours (another mount
	 * namespace, a deleted file): map_files/ opens the very mapping */
	if (elf_foreach_func_offset(path, file_cb, &f->t) == -ENOENT && alt)
		elf_foreach_func_offset(alt, file_cb, &f->t);
	qsort(f->t.v, f->t.n, sizeof(*f->t.v), sym_cmp);
	s->files[s->nfiles++] = f;
	return f;
}

static time_t mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

/* (Re)read p's executable mappings, keeping the ones read before that
 * no new one overlaps.  A process gone (or a zombie, whose maps file is
 * empty) keeps the ones read before (none: its frames are "[unknown]"). */
static void proc_read(struct stacksym *s, struct uproc *p)
{
	char path[64], line[4096];
	struct umap *v = NULL, *m;
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off;
		char perms[8], file[4096] = "", alt[128];
		int pos = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &lo, &hi, perms, &off,
			   &pos) != 4 || !strchr(perms, 'x'))
			continue;
		sscanf(line + pos, " %4095[^\n]", file);
		m = realloc(v, (n + 1) * sizeof(*m));
		if (!m)
			break;
		v = m;
		m = &v[n++];
		*m = (struct umap){ lo, hi, off, NULL, "" };
		if (file[0] == '/') {
			const char *b = strrchr(file, '/') + 1;
			char *del = strstr(file, " (deleted)");

			if (del)
				*del = '\0';
			snprintf(m->label, sizeof(m->label), "%s", b);
			snprintf(alt, sizeof(alt), "/proc/%d/map_files/%llx-%llx", (int)p->pid,
				 lo, hi);
			m->f = file_get(s, file, alt);
		} else {
			snprintf(m->label, sizeof(m->label), "%s", file[0] ? file : "[anon]");
		}
	}
	fclose(f);
	if (!n)
		return;
	/* the mappings read before that no new one overlaps stay: a read
	 * while the process exits sees part of its mappings (the kernel
	 * reads maps without the mmap lock, 6.17+: measured, 3 of python3's
	 * 17 executable ones at its exit, libc's gone, which named every
	 * frame in libc "[unknown]"); an address in one of them is from
	 * before, its object's */
	for (size_t i = 0; i < p->n; i++) {
		bool covered = false;

		for (size_t j = 0; j < n && !covered; j++)
			covered = p->v[i].start < v[j].end && v[j].start < p->v[i].end;
		if (covered)
			continue;
		m = realloc(v, (n + 1) * sizeof(*m));
		if (!m)
			break;
		v = m;
		v[n++] = p->v[i];
	}
	free(p->v);
	p->v = v;
	p->n = n;
}

static struct uproc *proc_get(struct stacksym *s, pid_t pid)
{
	struct uproc *p, *v;

	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	v = realloc(s->procs, (s->nprocs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->procs = v;
	p = &s->procs[s->nprocs++];
	*p = (struct uproc){ .pid = pid, .first = mono_s() };
	proc_read(s, p);
	return p;
}

/* The mapping of p holding ip: after a miss the mappings are read again
 * (a library loaded since), a few times per process at most. */
static const struct umap *proc_map(struct stacksym *s, struct uproc *p, uint64_t ip)
{
	for (int round = 0; p && round < 2; round++) {
		for (size_t i = 0; i < p->n; i++)
			if (ip >= p->v[i].start && ip < p->v[i].end)
				return &p->v[i];
		if (p->reads >= STACKSYM_REREADS)
			break;
		p->reads++;
		proc_read(s, p);
	}
	return NULL;
}

void stacksym_process(struct stacksym *s, pid_t pid)
{
	struct uproc *p;
	size_t n = s->nprocs;

	p = proc_get(s, pid);
	/* in its first second, read again at every call: it may have been
	 * read between its fork and its exec, or before the loader mapped
	 * its libraries */
	if (p && s->nprocs == n && mono_s() - p->first <= 1)
		proc_read(s, p);
}

/* ---- folding ------------------------------------------------------------------- */

/* The name of one frame into buf. */
static void frame_name(struct stacksym *s, bool user, struct uproc *p, uint64_t ip,
		       char *buf, size_t len)
{
	const struct umap *m;
	const struct sym *y;
	uint64_t off;

	if (!user) {
		if (!s->kloaded)
			load_kallsyms(s);
		y = symtab_find(&s->k, ip);
		snprintf(buf, len, "%s", y ? y->name : "[unknown]");
		return;
	}
	m = proc_map(s, p, ip);
	if (!m) {
		snprintf(buf, len, "[unknown]");
		return;
	}
	off = ip - m->start + m->pgoff;
	y = m->f ? symtab_find(&m->f->t, off) : NULL;
	if (y)
		snprintf(buf, len, "%s", y->name);
	else
		snprintf(buf, len, "%s+0x%" PRIx64, m->label, off);
}

size_t stacksym_fold(struct stacksym *s, bool user, pid_t pid, const uint64_t *ips,
		     int n, char *buf, size_t len)
{
	struct uproc *p = user ? proc_get(s, pid) : NULL;
	char names[128][128];
	size_t need = 0, at = 0;
	int k = 0, first = 0;

	if (!len)
		return 0;
	for (int i = 0; k < 128 && i < n && ips[i]; i++) {
		/* a return address is after its call: name the call */
		frame_name(s, user, p, i ? ips[i] - 1 : ips[i], names[k], sizeof(names[k]));
		/* the probe's own frames (an fentry's trampoline and program)
		 * are not the traced code's */
		if (!user && k == 0 && (!strncmp(names[k], "bpf_prog_", 9) ||
					!strncmp(names[k], "bpf_trampoline_", 15)))
			continue;
		need += strlen(names[k]) + 1;
		k++;
	}
	/* cut outermost frames (the last ones) until the rest fits */
	while (k > 0 && need + (first ? 6 : 0) > len) {
		need -= strlen(names[k - 1]) + 1;
		k--;
		first = 1;
	}
	buf[0] = '\0';
	if (first)
		at += (size_t)snprintf(buf, len, "[cut]%s", k ? ";" : "");
	for (int i = k - 1; i >= 0 && at < len; i--)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", names[i], i ? ";" : "");
	return at < len ? at : len - 1;
}
