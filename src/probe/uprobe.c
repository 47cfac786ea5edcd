// SPDX-License-Identifier: MIT
/*
 * User-space probes: uprobe/uretprobe on a function of a binary or
 * library, and USDT (SystemTap SDT) probes, all through the uprobe PMU
 * (perf_event_open with the path and the file offset; a pid limits it to
 * one process).  The context is the user's struct pt_regs: x86-64 passes
 * the first six integer arguments in rdi, rsi, rdx, rcx, r8, r9 and
 * returns in rax.  USDT arguments are described per site in the note
 * ("-4@%edi 8@-16(%rbp) 4@$42") and read from registers or user memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/grow.h"
#include "common/log.h"
#include "bpf/load.h"
#include "probe/demangle.h"
#include "probe/elfsym.h"
#include "probe/patched.h"
#include "probe/procroot.h"
#include "probe/provider.h"

static const int uprobe_arg_regs[] = { PT_DI, PT_SI, PT_DX, PT_CX, PT_R8, PT_R9 };

/* Split "lib:sym" at its last colon that is not one of a C++ "::"
 * ("prog:ns::C::f"). */
static int split_last(struct probe *p, const char *spec, char *left, size_t llen,
		      const char **right)
{
	const char *c = sym_spec_colon(spec);

	if (!c || c == spec || !c[1] || (size_t)(c - spec) >= llen)
		return -EINVAL;
	snprintf(left, llen, "%.*s", (int)(c - spec), spec);
	*right = c + 1;
	return 0;
}

/* name as the process sees it (its mount namespace: a container's
 * files, procroot.h), or as fay does for every process. */
static int find_binary(struct probe *p, const char *name)
{
	int err = proc_resolve_path(p->opts.pid, name, p->path, sizeof(p->path));

	if (err && p->opts.pid > 0 && proc_other_root(p->opts.pid))
		return probe_fail(p, err, "cannot find \"%s\" in the file system of pid %d "
				  "(its own root, /proc/%d/root): not mapped by it, not a "
				  "file there, a library of its ld.so.cache or library "
				  "directories, nor a program in its bin directories", name,
				  (int)p->opts.pid, (int)p->opts.pid);
	if (err)
		return probe_fail(p, err, "cannot find \"%s\": not a file, a library "
				  "known to the dynamic loader, nor a program in "
				  "$PATH", name);
	return 0;
}

/* At most this many functions one wildcard attaches to: a uprobe each
 * (a perf event and a link: two fds) where the kernel has no
 * uprobe.multi, else in one uprobe.multi link (libpython: ~12000). */
#define UPROBE_MAX_SITES 1024
#define UPROBE_MULTI_MAX_SITES (1 << 16)

/* function("lib:pthread_mutex_*"): every function whose name matches,
 * each at its own offset (p->priv); attached with its index as the BPF
 * cookie, which the program reads for s.name (probe_site_name()). */
struct uwild {
	uint64_t *offs;		/* offs[i]: the file offset of p->sites[i] */
	size_t cap;
	size_t max;		/* UPROBE_MAX_SITES or UPROBE_MULTI_MAX_SITES */
	char **ifuncs;		/* the binary's IFUNC names (while resolving) */
	size_t nifuncs, ifcap;
	bool multi;		/* one uprobe.multi link */
	int err;
};

/* One uprobe.multi link (bpf_have_uprobe_multi()), unless
 * FAY_NO_UPROBE_MULTI=1 says no: the fallback's tests and benchmark. */
static bool umulti_have(void)
{
	static int have = -1;
	const char *env = getenv("FAY_NO_UPROBE_MULTI");

	if (env && *env && strcmp(env, "0"))
		return false;
	if (have < 0)
		have = bpf_have_uprobe_multi();
	return have;
}

static int uwild_ifunc(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct uwild *w = arg;

	(void)addr;
	(void)size;
	if (array_grow((void **)&w->ifuncs, w->nifuncs, &w->ifcap, sizeof(*w->ifuncs), 16) ||
	    !(w->ifuncs[w->nifuncs] = strdup(name)))
		return -ENOMEM;
	w->nifuncs++;
	return 0;
}

/* A function of the binary at file offset off (elf_foreach_func_offset()):
 * a site when its name matches.  A name that is an IFUNC too (memcpy's
 * old version beside the IFUNC) is looked up as elf_func_offset() does:
 * the implementation this CPU runs. */
static int uwild_collect(const char *name, uint64_t off, uint64_t size, void *arg)
{
	struct probe *p = arg;
	struct uwild *w = p->priv;
	const char *pat = strrchr(p->spec, ':') + 1;
	size_t n = p->nsites;

	if (!glob_match(pat, name))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(p->sites[i], name))
			return 0;	/* in .symtab and .dynsym */
	if (n == w->max)
		return -E2BIG;
	if (n == w->cap) {
		size_t nc = w->cap ? 2 * w->cap : 16;
		char **nn = realloc(p->sites, nc * sizeof(*nn));
		uint64_t *no;

		if (!nn)
			return -ENOMEM;
		p->sites = nn;
		no = realloc(w->offs, nc * sizeof(*no));
		if (!no)
			return -ENOMEM;
		w->offs = no;
		w->cap = nc;
	}
	(void)size;
	w->offs[n] = off;
	for (size_t i = 0; i < w->nifuncs; i++)
		if (!strcmp(w->ifuncs[i], name)) {
			w->err = elf_func_offset(p->path, name, &w->offs[n]);
			if (w->err)
				return 0;	/* no implementation found: skip */
			break;
		}
	if (!(p->sites[n] = strdup(name)))
		return -ENOMEM;
	p->nsites++;
	return 0;
}

static int uwild_resolve(struct probe *p, const char *bin, const char *pat)
{
	struct uwild *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	p->priv = w;
	w->multi = umulti_have();
	w->max = w->multi ? UPROBE_MULTI_MAX_SITES : UPROBE_MAX_SITES;
	err = elf_foreach_ifunc(p->path, uwild_ifunc, w);
	if (!err)
		err = elf_foreach_func_offset(p->path, uwild_collect, p);
	for (size_t i = 0; i < w->nifuncs; i++)
		free(w->ifuncs[i]);
	free(w->ifuncs);
	w->ifuncs = NULL;
	w->nifuncs = 0;
	if (err == -E2BIG)
		return probe_fail(p, err, "function(\"%s\") matches more than %zu functions in %s: "
				  "name fewer%s", p->spec, w->max, p->path, w->multi ? "" :
				  " (a uprobe each: no uprobe.multi links, which Linux 6.6 "
				  "has, or FAY_NO_UPROBE_MULTI set)");
	if (err)
		return probe_fail(p, err, "cannot read the functions of %s: %s", p->path,
				  strerror(-err));
	if (!p->nsites)
		return probe_fail(p, -ENOENT, "no function matches \"%s\" in %s (see `fay "
				  "probes '%s:%s'`)", pat, p->path, bin, pat);
	p->prog_type = BPF_PROG_TYPE_KPROBE;
	if (w->multi) {
		p->attach_type = BPF_TRACE_UPROBE_MULTI_NR;
		p->mech = p->kind == PROBE_URETPROBE ? "uretprobe.multi" : "uprobe.multi";
	} else {
		p->mech = p->kind == PROBE_URETPROBE ? "uretprobe" : "uprobe";
	}
	p->nargs = p->kind == PROBE_URETPROBE ? 0 : 6;
	snprintf(p->desc, sizeof(p->desc), "%s %.300s:%.64s (%zu functions)%s", p->mech,
		 p->path, pat, p->nsites, p->opts.pid > 0 ? " (one pid)" : "");
	return 0;
}

static void uwild_release(struct probe *p)
{
	struct uwild *w = p->priv;

	if (!w)
		return;
	free(w->offs);
	free(w);
	p->priv = NULL;
}

int probe_uprobe_wsite(const struct probe *p, size_t i, const char **path, uint64_t *offset,
		       const char **sym)
{
	const struct uwild *w = p->priv;

	if ((p->kind != PROBE_UPROBE && p->kind != PROBE_URETPROBE) || !w ||
	    i >= p->nsites)
		return -EINVAL;
	*path = p->path;
	*offset = w->offs[i];
	*sym = p->sites[i];
	return 0;
}

struct more_ctx {
	struct probe *p;
	const char *sym;
	struct stat host;	/* p->path's */
};

/* One more file of the probe (p->more). */
static int more_add(struct probe *p, const char *path, uint64_t off, dev_t dev, ino_t ino)
{
	if (array_grow((void **)&p->more, p->nmore, &p->more_cap, sizeof(*p->more), 4))
		return -ENOMEM;
	if (!(p->more[p->nmore].path = strdup(path)))
		return -ENOMEM;
	p->more[p->nmore].offset = off;
	p->more[p->nmore].dev = dev;
	p->more[p->nmore++].ino = ino;
	return 0;
}

static int more_cb(const char *path, dev_t dev, ino_t ino, void *arg)
{
	struct more_ctx *m = arg;
	struct probe *p = m->p;
	uint64_t off;

	if (dev == m->host.st_dev && ino == m->host.st_ino)
		return 0;
	if (elf_func_offset(path, m->sym, &off))
		return 0;	/* another version, without the function */
	if (1 + p->nmore >= PROBE_MAX_FILES) {
		p->nfiles_capped++;
		return 0;
	}
	return more_add(p, path, off, dev, ino);
}

/*
 * function("libc:sym") in every process: besides the file fay resolves,
 * every other file of that name some process maps (a container's own
 * libc: another inode, which a uprobe on the host's never sees), found
 * in every /proc/PID/maps now (procroot.h).  A file that has no such
 * function (another version) is left out.
 */
static int find_more(struct probe *p, const char *sym)
{
	struct more_ctx m = { p, sym, { 0 } };
	const char *c = sym > p->spec ? sym - 1 : NULL;	/* split_last()'s colon */
	char bin[4096];

	if (p->opts.pid > 0 || !c || (size_t)(c - p->spec) >= sizeof(bin))
		return 0;
	snprintf(bin, sizeof(bin), "%.*s", (int)(c - p->spec), p->spec);
	if (strchr(bin, '/') || stat(p->path, &m.host))
		return 0;
	return proc_each_mapped(bin, more_cb, &m) == -ENOMEM ? -ENOMEM : 0;
}

/* The library name and symbol of a probe that follows processes: in
 * every process, a short name (no '/'); on one process (it may exec into
 * another root: a chroot, a container), any name; false for any other. */
static bool follow_names(const struct probe *p, char *bin, size_t len, const char **sym)
{
	if ((p->kind != PROBE_UPROBE && p->kind != PROBE_URETPROBE) || p->priv ||
	    !p->path[0])
		return false;	/* a wildcard (p->priv), unresolved */
	if (split_last((struct probe *)p, p->spec, bin, len, sym))
		return false;
	return p->opts.pid > 0 || !strchr(bin, '/');
}

bool probe_follows_processes(const struct probe *p)
{
	char bin[4096];
	const char *sym;

	return follow_names(p, bin, sizeof(bin), &sym);
}

int probe_child_file(const struct probe *p, pid_t pid, char *path, size_t len,
		     const char **sym)
{
	char bin[4096];

	if (!follow_names(p, bin, sizeof(bin), sym) || pid <= 0)
		return 0;
	return proc_resolve_path(pid, bin, path, len) ? 0 : 1;
}

size_t probe_files_capped(const struct probe *p)
{
	return p->nfiles_capped;
}

size_t probe_nfiles(const struct probe *p)
{
	if (p->kind != PROBE_UPROBE && p->kind != PROBE_URETPROBE)
		return 0;
	return p->path[0] ? 1 + p->nmore : 0;
}

/* Whether the instruction at file offset off of path is EVEX-encoded
 * (0x62: AVX-512; BOUND does not exist in 64-bit mode).  A uprobe there
 * corrupted the program: glibc's __memset_avx512_unaligned_erms, whose
 * first instruction is vpbroadcastb zmm16, esi, wrote other bytes under
 * one (kernel 6.18; issue 19 item 4). */
static bool evex_first(const char *path, uint64_t off)
{
	unsigned char b = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (pread(fd, &b, 1, (off_t)off) != 1)
		b = 0;
	close(fd);
	return b == 0x62;
}

/* p->desc of a probe on one function (sym): its files. */
static void uprobe_desc(struct probe *p, const char *sym)
{
	if (p->nmore && p->opts.pid > 0)
		snprintf(p->desc, sizeof(p->desc), "%s %.300s:%.64s+0x%llx (one pid) and %zu "
			 "other file%s of that name it mapped after it exec'ed (%zu files)",
			 p->mech, p->path, sym, (unsigned long long)p->offset, p->nmore,
			 p->nmore > 1 ? "s" : "", p->nmore + 1);
	else if (p->nmore)
		snprintf(p->desc, sizeof(p->desc), "%s %.300s:%.64s+0x%llx and %zu other "
			 "file%s of that name mapped on this host (%zu files)", p->mech, p->path,
			 sym, (unsigned long long)p->offset, p->nmore, p->nmore > 1 ? "s" : "",
			 p->nmore + 1);
	else
		snprintf(p->desc, sizeof(p->desc), "%s %.400s:%.64s+0x%llx%s", p->mech, p->path,
			 sym, (unsigned long long)p->offset, p->opts.pid > 0 ? " (one pid)" : "");
}

static int uprobe_resolve(struct probe *p)
{
	char bin[4096];
	const char *sym;
	int err;

	if (split_last(p, p->spec, bin, sizeof(bin), &sym))
		return probe_fail(p, -EINVAL, "function(\"%s\"): expected "
				  "\"library:function\" or \"/path/binary:function\"",
				  p->spec);
	err = find_binary(p, bin);
	if (err)
		return err;
	if (strpbrk(sym, "*?["))
		return uwild_resolve(p, bin, sym);
	err = elf_func_offset(p->path, sym, &p->offset);
	if (err == -ENOEXEC)
		return probe_fail(p, err, "%s is not an ELF file", p->path);
	if (err == -ENXIO)
		return probe_fail(p, err, "\"%s\" of %s is an IFUNC (its implementation is "
				  "chosen at load) and fay does not load %s to run its "
				  "resolver: name the implementation", sym, p->path, p->path);
	if (err == -ENOTUNIQ)
		return probe_fail(p, err, "\"%s\" names several C++ functions (overloads) in "
				  "%s: give one's parameters as `nm -C` prints them, "
				  "\"%s(int, char const*)\"", sym, p->path, sym);
	if (err)
		return probe_fail(p, err, "no function \"%s\" in %s (see `fay probes "
				  "'%s:%s*'`)", sym, p->path, bin, sym);
	p->prog_type = BPF_PROG_TYPE_KPROBE;
	p->mech = p->kind == PROBE_URETPROBE ? "uretprobe" : "uprobe";
	p->nargs = p->kind == PROBE_URETPROBE ? 0 : 6;
	err = find_more(p, sym);
	if (err)
		return probe_fail(p, err, "out of memory");
	uprobe_desc(p, sym);
	return 0;
}

static int uprobe_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n)
{
	emit_pt_regs(ir, dst, uprobe_arg_regs[n]);
	return 0;
}

static int uprobe_emit_ret(struct probe *p, struct ir *ir, ir_reg dst)
{
	if (p->kind != PROBE_URETPROBE)
		return probe_fail(p, -EOPNOTSUPP, "ret: %s is a function entry",
				  p->desc);
	emit_pt_regs(ir, dst, PT_AX);
	return 0;
}

/* One uprobe PMU event at offset (ref_ctr: USDT semaphore offset or 0)
 * in process pid (<= 0: every process); with_cookie: through a BPF link
 * carrying cookie. */
static int uprobe_open_pid(struct probe *p, const char *path, int prog_fd, uint64_t offset,
			   uint64_t ref_ctr, bool ret, bool with_cookie, uint64_t cookie,
			   pid_t pid)
{
	struct perf_event_attr attr = { 0 };
	int type = perf_pmu_type("uprobe"), bit, fd;

	if (type < 0)
		return probe_fail(p, type, "this kernel has no uprobe PMU "
				  "(CONFIG_UPROBE_EVENTS is off)");
	attr.type = (uint32_t)type;
	attr.config1 = (uint64_t)(uintptr_t)path;	/* uprobe_path */
	attr.config2 = offset;				/* probe_offset */
	attr.sample_period = 1;
	attr.wakeup_events = 1;
	if (ret) {
		bit = perf_pmu_bit("uprobe", "retprobe");
		if (bit < 0)
			return bit;
		attr.config |= 1ull << bit;
	}
	if (ref_ctr) {
		bit = perf_pmu_bit("uprobe", "ref_ctr_offset");
		if (bit < 0)
			return probe_fail(p, bit, "this kernel cannot drive USDT "
					  "semaphores (no ref_ctr_offset)");
		attr.config |= ref_ctr << bit;
	}
	if (with_cookie) {
		fd = pid > 0 ? perf_attach_bpf_cookie(p, &attr, pid, -1, prog_fd, cookie) :
			       perf_attach_bpf_cookie(p, &attr, -1, 0, prog_fd, cookie);
		if (fd == -ESRCH)
			return probe_fail(p, fd, "no process %d", (int)pid);
		return fd;
	}
	fd = pid > 0 ? perf_attach_bpf(&attr, pid, -1, prog_fd) :
		       perf_attach_bpf(&attr, -1, 0, prog_fd);
	if (fd == -ESRCH)
		return probe_fail(p, fd, "no process %d", (int)pid);
	if (fd < 0)
		return fd;
	return probe_keep_fd(p, fd);
}

/* uprobe_open_pid() in the probe's process (or every process). */
static int uprobe_open_at(struct probe *p, const char *path, int prog_fd, uint64_t offset,
			  uint64_t ref_ctr, bool ret, bool with_cookie, uint64_t cookie)
{
	return uprobe_open_pid(p, path, prog_fd, offset, ref_ctr, ret, with_cookie, cookie,
			       p->opts.pid);
}

static int uprobe_open(struct probe *p, int prog_fd, uint64_t offset,
		       uint64_t ref_ctr, bool ret, bool with_cookie, uint64_t cookie)
{
	return uprobe_open_at(p, p->path, prog_fd, offset, ref_ctr, ret, with_cookie, cookie);
}

/* An every-process uprobe on offs of path is refused while a process
 * has fay's inline probe there (patched.c: the kernel would corrupt it). */
static int refuse_if_patched(struct probe *p, const char *path, const uint64_t *offs, size_t n)
{
	size_t which = 0;
	pid_t pid = 0;
	int rc;

	if (p->opts.pid > 0)
		return 0;	/* the kernel puts a pid's uprobe in that process alone */
	rc = patched_in_process(path, offs, n, &pid, &which);
	if (rc < 0)
		return probe_fail(p, rc, "out of memory");
	if (rc)
		return probe_fail(p, -EBUSY, "%s: process %d has an inline probe (fay's runtime "
				  "rewrote the function at file offset 0x%llx of %s): a uprobe in "
				  "every process would be written over it and corrupt that process "
				  "when removed; stop the inline query first, or name processes "
				  "with -p", p->desc, (int)pid, (unsigned long long)offs[which],
				  path);
	return 0;
}

/* Attach offs[0..n) (cookies[]) in one uprobe.multi link, kept with the
 * probe; where the kernel refuses a site (it cannot run the first
 * instruction out of line: ENOTSUPP, 524), each half in its own link, down
 * to the refused sites, which are left out and counted in *nref.  0 or
 * -errno (another error). */
static int umulti_attach(struct probe *p, int prog_fd, const uint64_t *offs,
			 const uint64_t *cookies, size_t n, size_t *nref)
{
	int fd = bpf_uprobe_multi_link(prog_fd, p->path, offs, cookies, n, p->opts.pid,
				       p->kind == PROBE_URETPROBE);

	if (fd >= 0)
		return probe_keep_fd(p, fd) < 0 ? -ENOMEM : 0;
	if (fd != -524 && fd != -EINVAL && fd != -EOPNOTSUPP)
		return fd;
	if (n == 1) {
		pr_debug("%s: the kernel refused a uprobe on %s (file offset 0x%llx): %s",
			 p->desc, p->sites[cookies[0]], (unsigned long long)offs[0],
			 errstr(fd));
		(*nref)++;
		return 0;
	}
	fd = umulti_attach(p, prog_fd, offs, cookies, n / 2, nref);
	if (fd)
		return fd;
	return umulti_attach(p, prog_fd, offs + n / 2, cookies + n / 2, n - n / 2, nref);
}

/* A wildcard's sites: those that begin with an EVEX instruction left out
 * (one warning naming them; all of them is an error), the rest in one
 * uprobe.multi link, or a uprobe each; site i carries i as its cookie. */
static int uwild_attach(struct probe *p, int prog_fd)
{
	struct uwild *w = p->priv;
	uint64_t *offs = calloc(p->nsites, sizeof(*offs));
	uint64_t *cookies = calloc(p->nsites, sizeof(*cookies));
	size_t n = 0, nevex = 0, first = 0;
	int fd = 0;

	if (!offs || !cookies) {
		fd = probe_fail(p, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < p->nsites; i++) {
		if (evex_first(p->path, w->offs[i])) {
			if (!nevex++)
				first = i;
			continue;
		}
		offs[n] = w->offs[i];
		cookies[n++] = i;
	}
	if (!n) {
		fd = probe_fail(p, -EOPNOTSUPP, "%s: every function it matches begins with an "
				"EVEX (AVX-512) instruction, which the kernel's uprobe executes "
				"wrongly out of line (the traced program's results change): "
				"probe them inline (-p PID or fay run)", p->desc);
		goto out;
	}
	if (nevex)
		pr_warn("%s: %zu of its functions left out (%s%s): they begin with an EVEX "
			"(AVX-512) instruction, which the kernel's uprobe executes wrongly out "
			"of line; probe them inline (-p PID or fay run)", p->desc, nevex,
			p->sites[first], nevex > 1 ? ", ..." : "");
	if (w->multi) {
		size_t nref = 0;

		fd = umulti_attach(p, prog_fd, offs, cookies, n, &nref);
		if (fd == -ESRCH)
			fd = probe_fail(p, fd, "no process %d", (int)p->opts.pid);
		else if (fd >= 0 && nref == n)
			fd = probe_fail(p, -EOPNOTSUPP, "%s: the kernel refused a uprobe on "
					"every function it matches", p->desc);
		else if (fd < 0)
			fd = probe_fail(p, fd, "cannot attach %s in uprobe.multi links: %s",
					p->desc, errstr(fd));
		else if (nref)
			pr_warn("%s: %zu of its functions left out: the kernel refused a "
				"uprobe at their first instruction", p->desc, nref);
		goto out;
	}
	for (size_t i = 0; i < n && fd >= 0; i++)
		fd = uprobe_open(p, prog_fd, offs[i], 0, p->kind == PROBE_URETPROBE, true,
				 cookies[i]);
out:
	free(offs);
	free(cookies);
	return fd < 0 ? fd : 0;
}

static int uprobe_attach(struct probe *p, int prog_fd)
{
	const struct uwild *w = p->priv;
	int rc = w ? refuse_if_patched(p, p->path, w->offs, p->nsites) :
		     refuse_if_patched(p, p->path, &p->offset, 1);

	for (size_t i = 0; !rc && i < p->nmore; i++)
		rc = refuse_if_patched(p, p->more[i].path, &p->more[i].offset, 1);
	if (rc)
		return rc;

	if (w)
		return uwild_attach(p, prog_fd);
	if (evex_first(p->path, p->offset))
		return probe_fail(p, -EOPNOTSUPP, "%s: the function at file offset 0x%llx "
				  "begins with an EVEX (AVX-512) instruction, which the kernel's "
				  "uprobe executes wrongly out of line (the traced program's "
				  "results change: libc's memset wrote other bytes): probe it "
				  "inline (-p PID or fay run)", p->desc,
				  (unsigned long long)p->offset);
	for (size_t i = 0; i < p->nmore; i++) {
		int err;

		if (evex_first(p->more[i].path, p->more[i].offset)) {
			pr_warn("%s: not probed in %s: the function begins with an EVEX (AVX-512) "
				"instruction, which the kernel's uprobe executes wrongly",
				p->desc, p->more[i].path);
			continue;
		}
		err = uprobe_open_at(p, p->more[i].path, prog_fd, p->more[i].offset, 0,
				     p->kind == PROBE_URETPROBE, false, 0);

		/* a container gone meanwhile (its /proc/PID/root path with it) */
		if (err < 0 && err != -ENOENT)
			return err;
	}
	return uprobe_open(p, prog_fd, p->offset, 0, p->kind == PROBE_URETPROBE,
			   false, 0);
}

/* Is (dev, ino) one of the probe's files already? */
static bool probed_already(const struct probe *p, dev_t dev, ino_t ino)
{
	struct stat st;

	if (!stat(p->path, &st) && st.st_dev == dev && st.st_ino == ino)
		return true;
	for (size_t i = 0; i < p->nmore; i++)
		if (p->more[i].dev == dev && p->more[i].ino == ino)
			return true;
	return false;
}

/* A uprobe of p on function sym of file path (its offset in *off), in
 * process pid (<= 0: every process): 1, 0 (the file has no such
 * function, or it is gone with its process), or -errno. */
static int open_sym(struct probe *p, const char *path, const char *sym, pid_t pid,
		    uint64_t *off)
{
	int err;

	if (elf_func_offset(path, sym, off))
		return 0;	/* another version, without the function */
	if (evex_first(path, *off))
		return probe_fail(p, -EOPNOTSUPP, "%s: not probed in %s: the function begins "
				  "with an EVEX (AVX-512) instruction, which the kernel's "
				  "uprobe executes wrongly", p->desc, path);
	err = uprobe_open_pid(p, path, p->prog_fd, *off, 0, p->kind == PROBE_URETPROBE,
			      false, 0, pid);
	if (err == -ENOENT || err == -ESRCH)
		return 0;	/* the process and its root gone meanwhile */
	return err < 0 ? err : 1;
}

/* Attach p to one more file, path (stat st), that pid maps or will map
 * under the probe's library name: 1, 0 (nothing to do), or -errno. */
static int follow_file(struct probe *p, pid_t pid, const char *path, const struct stat *st,
		       const char *sym)
{
	uint64_t off;
	int err;

	if (probed_already(p, st->st_dev, st->st_ino))
		return 0;
	if (1 + p->nmore >= PROBE_MAX_FILES) {
		p->nfiles_capped++;
		return probe_fail(p, -E2BIG, "%s: %s (process %d) left out: the probe is on %d "
				  "files already", p->desc, path, (int)pid, PROBE_MAX_FILES);
	}
	err = open_sym(p, path, sym, p->opts.pid, &off);
	if (err <= 0)
		return err;
	err = more_add(p, path, off, st->st_dev, st->st_ino);
	if (err)
		return probe_fail(p, err, "out of memory");
	uprobe_desc(p, sym);
	return 1;
}

int probe_follow_pid(struct probe *p, pid_t pid, char *path, size_t len)
{
	char bin[4096];
	const char *sym;
	struct stat st;

	if (!follow_names(p, bin, sizeof(bin), &sym) || !probe_attached(p) ||
	    (p->opts.pid > 0 && pid != p->opts.pid))
		return 0;
	if (proc_resolve_path(pid, bin, path, len) || stat(path, &st))
		return 0;	/* gone, or none there */
	return follow_file(p, pid, path, &st, sym);
}

int probe_follow_mapping(struct probe *p, pid_t pid, uint64_t addr, uint64_t size, char *path,
			 size_t len)
{
	char bin[4096];
	const char *sym;
	struct stat st;

	if (!follow_names(p, bin, sizeof(bin), &sym) || !probe_attached(p) ||
	    (p->opts.pid > 0 && pid != p->opts.pid))
		return 0;
	/* the common case, a file probed already (a host process's libc),
	 * costs two system calls; only a new file is looked up in the maps
	 * for the path it is named by */
	if (proc_mapped_file(pid, addr, size, bin, &st) ||
	    probed_already(p, st.st_dev, st.st_ino))
		return 0;	/* another file, unmapped, gone, or probed */
	if (proc_mapped_at(pid, addr, bin, path, len) || stat(path, &st))
		return 0;
	return follow_file(p, pid, path, &st, sym);
}

/* Is (pid, dev, ino) one of the probe's descendant attachments already? */
static bool kid_already(const struct probe *p, pid_t pid, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < p->nkids; i++)
		if (p->kids[i].pid == pid && p->kids[i].dev == dev && p->kids[i].ino == ino)
			return true;
	return false;
}

int probe_follow_child(struct probe *p, pid_t pid, uint64_t addr, uint64_t size, char *path,
		       size_t len)
{
	char bin[4096];
	const char *sym;
	struct stat st;
	uint64_t off;
	int err;

	if (!follow_names(p, bin, sizeof(bin), &sym) || !probe_attached(p) ||
	    p->opts.pid <= 0 || pid == p->opts.pid || pid <= 0)
		return 0;
	if (size ? proc_mapped_file(pid, addr, size, bin, &st) ||
		   proc_mapped_at(pid, addr, bin, path, len) :
		   proc_resolve_path(pid, bin, path, len))
		return 0;	/* gone, none there, another file */
	if (stat(path, &st) || kid_already(p, pid, st.st_dev, st.st_ino))
		return 0;
	if (p->nkids >= PROBE_MAX_KIDS) {
		p->nfiles_capped++;
		return probe_fail(p, -E2BIG, "%s: process %d (a descendant) left out: the probe "
				  "is on %d descendants' files already", p->desc, (int)pid,
				  PROBE_MAX_KIDS);
	}
	err = open_sym(p, path, sym, pid, &off);
	if (err <= 0)
		return err;
	if (array_grow((void **)&p->kids, p->nkids, &p->kids_cap, sizeof(*p->kids), 8))
		return probe_fail(p, -ENOMEM, "out of memory");
	p->kids[p->nkids++] = (struct probe_kid){ .pid = pid, .dev = st.st_dev,
						  .ino = st.st_ino };
	return 1;
}

const struct provider provider_uprobe = {
	.name = "uprobe",
	.resolve = uprobe_resolve,
	.emit_arg = uprobe_emit_arg,
	.emit_ret = uprobe_emit_ret,
	.attach = uprobe_attach,
	.release = uwild_release,
};

/* ---- USDT ------------------------------------------------------------------ */

#define USDT_MAX_ARGS 12

enum usdt_loc { USDT_REG, USDT_MEM, USDT_CONST };

struct usdt_arg {
	enum usdt_loc loc;
	int size;		/* bytes */
	bool is_signed;
	int reg;		/* pt_regs offset */
	int64_t val;		/* displacement or constant */
};

/* The argument places of one or more sites (sites that share them). */
struct usdt_spec {
	const char *text;	/* as in the note: "-8@%rax 4@-20(%rbp)" */
	struct usdt_arg args[USDT_MAX_ARGS];
	int nargs;
};

/* At most this many different argument layouts per probe. */
#define USDT_MAX_SPECS 64

/*
 * A probe's sites.  When they all keep their arguments in the same
 * places there is one spec and the program reads them directly; when
 * they differ (the compiler chose %rax at one site and %rcx at another)
 * each site is attached with its spec's index as the BPF cookie and the
 * program picks the layout with bpf_get_attach_cookie(), as libbpf's
 * usdt.bpf.h does.
 */
struct usdt {
	struct usdt_site *sites;
	size_t nsites;
	struct usdt_spec specs[USDT_MAX_SPECS];
	int nspecs;
	int *site_spec;		/* per site: its index in specs */
};

static const struct { const char *names[4]; int off; } x86_regs[] = {
	{ { "rax", "eax", "ax", "al" }, PT_AX },
	{ { "rbx", "ebx", "bx", "bl" }, PT_BX },
	{ { "rcx", "ecx", "cx", "cl" }, PT_CX },
	{ { "rdx", "edx", "dx", "dl" }, PT_DX },
	{ { "rsi", "esi", "si", "sil" }, PT_SI },
	{ { "rdi", "edi", "di", "dil" }, PT_DI },
	{ { "rbp", "ebp", "bp", "bpl" }, PT_BP },
	{ { "rsp", "esp", "sp", "spl" }, PT_SP },
	{ { "r8", "r8d", "r8w", "r8b" }, PT_R8 },
	{ { "r9", "r9d", "r9w", "r9b" }, PT_R9 },
	{ { "r10", "r10d", "r10w", "r10b" }, PT_R10 },
	{ { "r11", "r11d", "r11w", "r11b" }, PT_R11 },
	{ { "r12", "r12d", "r12w", "r12b" }, PT_R12 },
	{ { "r13", "r13d", "r13w", "r13b" }, PT_R13 },
	{ { "r14", "r14d", "r14w", "r14b" }, PT_R14 },
	{ { "r15", "r15d", "r15w", "r15b" }, PT_R15 },
};

static int x86_reg(const char *name, size_t len)
{
	for (size_t r = 0; r < ARRAY_SIZE(x86_regs); r++)
		for (int k = 0; k < 4; k++)
			if (strlen(x86_regs[r].names[k]) == len &&
			    !strncmp(x86_regs[r].names[k], name, len))
				return x86_regs[r].off;
	return -1;
}

/* Parse one "SIZE@LOC" argument; 0 or -EINVAL. */
static int usdt_parse_arg(const char *s, size_t len, struct usdt_arg *a)
{
	char buf[128], *at, *loc, *end;
	long size;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	at = strchr(buf, '@');
	if (!at)
		return -EINVAL;
	*at = '\0';
	size = strtol(buf, &end, 10);
	if (*end || !size || labs(size) > 8 || bpf_size_code((unsigned int)labs(size)) < 0)
		return -EINVAL;
	a->is_signed = size < 0;
	a->size = (int)labs(size);
	loc = at + 1;
	if (loc[0] == '%') {
		a->loc = USDT_REG;
		a->reg = x86_reg(loc + 1, strlen(loc + 1));
		return a->reg < 0 ? -EINVAL : 0;
	}
	if (loc[0] == '$') {
		a->loc = USDT_CONST;
		a->val = strtoll(loc + 1, &end, 0);
		return *end ? -EINVAL : 0;
	}
	/* [disp](%reg) */
	a->loc = USDT_MEM;
	a->val = loc[0] == '(' ? 0 : strtoll(loc, &end, 0);
	if (loc[0] == '(')
		end = loc;
	if (end[0] != '(' || end[1] != '%')
		return -EINVAL;
	{
		char *close = strchr(end, ')');

		if (!close || close[1] || strchr(end, ','))
			return -EINVAL;	/* no index/scale forms */
		a->reg = x86_reg(end + 2, (size_t)(close - end - 2));
	}
	return a->reg < 0 || a->reg == PT_IP ? -EINVAL : 0;
}

static int usdt_parse_args(const char *spec, struct usdt_arg *args, int *nargs)
{
	const char *p = spec;

	*nargs = 0;
	while (*p) {
		size_t len;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		len = strcspn(p, " ");
		if (*nargs >= USDT_MAX_ARGS || usdt_parse_arg(p, len, &args[*nargs]))
			return -EINVAL;
		(*nargs)++;
		p += len;
	}
	return 0;
}

struct usdt_find {
	const char *provider, *name;
	struct usdt *u;
	int err;
};

static int usdt_collect(const struct usdt_site *s, void *arg)
{
	struct usdt_find *f = arg;
	struct usdt_site *n;

	if ((f->provider && strcmp(f->provider, s->provider)) ||
	    strcmp(f->name, s->name))
		return 0;
	n = realloc(f->u->sites, (f->u->nsites + 1) * sizeof(*n));
	if (!n) {
		f->err = -ENOMEM;
		return 1;
	}
	f->u->sites = n;
	n[f->u->nsites++] = *s;
	return 0;
}

/* Parse each site's argument spec once per distinct text; p->nargs is
 * the fewest arguments any site has. */
static int usdt_group_specs(struct probe *p, struct usdt *u)
{
	u->site_spec = calloc(u->nsites, sizeof(*u->site_spec));
	if (!u->site_spec)
		return -ENOMEM;
	for (size_t i = 0; i < u->nsites; i++) {
		const struct usdt_site *s = &u->sites[i];
		struct usdt_spec *sp;
		int k;

		for (k = 0; k < u->nspecs; k++)
			if (!strcmp(u->specs[k].text, s->args))
				break;
		u->site_spec[i] = k;
		if (k < u->nspecs)
			continue;
		if (k == USDT_MAX_SPECS)
			return probe_fail(p, -E2BIG, "USDT %s:%s: more than %d different "
					  "argument layouts among its %zu sites",
					  s->provider, s->name, USDT_MAX_SPECS, u->nsites);
		sp = &u->specs[u->nspecs++];
		sp->text = s->args;
		if (usdt_parse_args(s->args, sp->args, &sp->nargs))
			return probe_fail(p, -EINVAL, "USDT %s:%s: cannot parse the "
					  "argument spec \"%s\" (site %zu at 0x%llx)",
					  s->provider, s->name, s->args, i,
					  (unsigned long long)s->offset);
	}
	p->nargs = u->specs[0].nargs;
	for (int k = 1; k < u->nspecs; k++)
		if (u->specs[k].nargs < p->nargs)
			p->nargs = u->specs[k].nargs;
	return 0;
}

static int usdt_resolve(struct probe *p)
{
	char left[4096], bin[4096], prov[128];
	const char *name, *pname = NULL;
	struct usdt_find f = { 0 };
	struct usdt *u;
	int err;

	/* "/path/bin:provider:name" or "bin:name". */
	if (split_last(p, p->spec, left, sizeof(left), &name))
		return probe_fail(p, -EINVAL, "usdt(\"%s\"): expected "
				  "\"/path/binary:provider:name\"", p->spec);
	if (!split_last(p, left, bin, sizeof(bin), &pname) && !strchr(pname, '/')) {
		snprintf(prov, sizeof(prov), "%s", pname);
		pname = prov;
	} else {
		snprintf(bin, sizeof(bin), "%s", left);
		pname = NULL;
	}
	err = find_binary(p, bin);
	if (err)
		return err;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	p->priv = u;
	f.provider = pname;
	f.name = name;
	f.u = u;
	err = elf_foreach_usdt(p->path, usdt_collect, &f);
	if (f.err)
		return f.err;
	if (err < 0)
		return probe_fail(p, err, "cannot read %s: %s", p->path, errstr(err));
	if (!u->nsites)
		return probe_fail(p, -ENOENT, "no USDT probe %s%s%s in %s (see `fay "
				  "probes 'usdt:%s:*'`)", pname ? pname : "",
				  pname ? ":" : "", name, p->path, bin);
	err = usdt_group_specs(p, u);
	if (err)
		return err;
	p->prog_type = BPF_PROG_TYPE_KPROBE;
	p->mech = "usdt";
	if (u->nspecs > 1)
		snprintf(p->desc, sizeof(p->desc), "usdt %.380s:%.40s:%.40s (%zu sites, "
			 "%d argument layouts)", p->path, u->sites[0].provider, name,
			 u->nsites, u->nspecs);
	else
		snprintf(p->desc, sizeof(p->desc), "usdt %.400s:%.40s:%.40s (%zu site%s)",
			 p->path, u->sites[0].provider, name, u->nsites,
			 u->nsites == 1 ? "" : "s");
	return 0;
}

/* dst = the argument a describes (register, user memory or constant). */
static void usdt_read(struct ir *ir, ir_reg dst, const struct usdt_arg *a)
{
	int sh = 64 - 8 * a->size;

	switch (a->loc) {
	case USDT_CONST:
		ir_mov(ir, dst, IR_I(a->val));
		return;
	case USDT_REG:
		emit_pt_regs(ir, dst, a->reg);
		break;
	case USDT_MEM: {
		int slot = ir_stack_alloc(ir, 8, 8);

		emit_pt_regs(ir, dst, a->reg);
		ir_alu(ir, BPF_ADD, dst, IR_I(a->val));
		ir_zero(ir, slot, 8);
		ir_probe_read(ir, IR_NOREG, slot, (unsigned int)a->size, IR_R(dst),
			      true, false);
		ir_load(ir, dst, IR_S(slot), 0, 8, 0);
		break;
	}
	}
	if (sh) {
		ir_alu(ir, BPF_LSH, dst, IR_I(sh));
		ir_alu(ir, a->is_signed ? BPF_ARSH : BPF_RSH, dst, IR_I(sh));
	}
}

static int usdt_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n)
{
	struct usdt *u = p->priv;
	ir_reg c;
	int done;

	if (u->nspecs == 1) {
		usdt_read(ir, dst, &u->specs[0].args[n]);
		return 0;
	}
	/* the site's layout: its spec index, attached as the cookie */
	c = ir_vreg(ir);
	done = ir_label_new(ir);
	ir_call(ir, c, BPF_FUNC_get_attach_cookie, 1, IR_R(ir_ctx(ir)));
	for (int k = 0; k < u->nspecs; k++) {
		int next = ir_label_new(ir);

		if (k < u->nspecs - 1)
			ir_jmp(ir, BPF_JNE, c, IR_I(k), next);
		usdt_read(ir, dst, &u->specs[k].args[n]);
		ir_goto(ir, done);
		ir_label(ir, next);
	}
	ir_label(ir, done);
	return 0;
}

static int usdt_attach(struct probe *p, int prog_fd)
{
	struct usdt *u = p->priv;

	for (size_t i = 0; i < u->nsites; i++) {
		int err = uprobe_open(p, prog_fd, u->sites[i].offset,
				      u->sites[i].sema_offset, false,
				      u->nspecs > 1, (uint64_t)u->site_spec[i]);

		if (err)
			return err;
	}
	return 0;
}

static void usdt_release(struct probe *p)
{
	struct usdt *u = p->priv;

	if (u) {
		free(u->sites);
		free(u->site_spec);
	}
	free(u);
	p->priv = NULL;
}

const struct provider provider_usdt = {
	.name = "usdt",
	.resolve = usdt_resolve,
	.emit_arg = usdt_emit_arg,
	.attach = usdt_attach,
	.release = usdt_release,
};
