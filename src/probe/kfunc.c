// SPDX-License-Identifier: MIT
/*
 * Kernel functions: fentry/fexit when the kernel allows them (BTF gives
 * the function's id and argument count; the context is an array of u64
 * arguments, the return value after them), else kprobe/kretprobe through
 * the kprobe PMU (the context is struct pt_regs), else a plain error.
 *
 * Which one works is decided at resolve time by loading a trivial fentry
 * program: some kernels (lockdown, a hypervisor policy) refuse tracing
 * programs with EPERM even to root, and some are built without kprobes.
 */
#include <errno.h>
#include <fnmatch.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "bpf/kbtf.h"
#include "bpf/load.h"
#include "common/log.h"
#include "probe/provider.h"

static const int kprobe_arg_regs[] = { PT_DI, PT_SI, PT_DX, PT_CX, PT_R8, PT_R9 };

static bool is_exit(const struct probe *p)
{
	return p->kind == PROBE_KFUNC_EXIT;
}

/* Can a tracing program attach here?  0, or -errno of the refusal. */
static int fentry_try(struct probe *p)
{
	int fd = bpf_trivial_prog(BPF_PROG_TYPE_TRACING, p->attach_type, p->attach_btf_id);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static bool in_kallsyms(const char *name)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char sym[256], t;

		if (sscanf(line, "%*s %c %255s", &t, sym) == 2 &&
		    (t == 't' || t == 'T') && !strcmp(sym, name))
			found = true;
	}
	fclose(f);
	return found;
}

/* ---- wildcards: kprobe.multi ------------------------------------------------ */

/* At most this many functions one wildcard attaches to: in one
 * kprobe.multi link, or one kprobe each (a perf event and a link: two
 * fds, and a kprobe the kernel registers one at a time) where the kernel
 * has no kprobe.multi. */
#define KFUNC_MAX_SITES (1 << 17)
#define KFUNC_MAX_KPROBES 4096

/* Does this kernel make kprobe.multi links?  As libbpf probes it: a link
 * to a function no kernel has fails with ESRCH (or ENOENT) where it
 * does, EOPNOTSUPP where it does not (no CONFIG_FPROBE: Debian's 6.1). */
static int kmulti_try(void)
{
	const char *sym = "fay_no_such_kernel_function";
	int fd = bpf_trivial_prog(BPF_PROG_TYPE_KPROBE, BPF_TRACE_KPROBE_MULTI, 0), link;

	if (fd < 0)
		return fd;
	link = bpf_kprobe_multi_link(fd, &sym, 1, false);
	close(fd);
	if (link >= 0) {
		close(link);
		return 0;
	}
	return link == -ESRCH || link == -ENOENT ? 0 : link;
}

/* What fay's own probe runs through (the BPF program's helpers and maps,
 * the stack walker, the fprobe path into it): probing these would only
 * count fay.  The kernel skips a program entered again on the same CPU
 * (bpf_prog_active) but counts each skip as a miss. */
static const char *const kfunc_own[] = {
	"bpf_*", "__bpf_*", "___bpf_*", "htab_*", "array_map_*", "percpu_array_*",
	"stack_map_*", "get_perf_callchain", "perf_callchain_*", "unwind_*",
	"__unwind_*", "fprobe_*", "rethook_*", "arch_rethook_*", "kprobe_multi_*",
	"ftrace_*", "__ftrace_*", "arch_ftrace_*", "copy_from_kernel_nofault*",
	"copy_from_user_nofault", "strncpy_from_*_nofault", "migrate_disable",
	"migrate_enable", "__rcu_read_lock", "__rcu_read_unlock", "rcu_read_lock_*",
};

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the kprobes blacklist (debugfs): functions the kernel says
 * must not be probed ("0xADDR-0xADDR\tNAME"), sorted.  *n 0 when it
 * cannot be read (no debugfs). */
static char **kprobe_blacklist(size_t *n)
{
	FILE *f = fopen("/sys/kernel/debug/kprobes/blacklist", "re");
	char line[512], name[256], **v = NULL;
	size_t cap = 0;

	*n = 0;
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %255s", name) != 1)
			continue;
		if (*n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		if (!(v[*n] = strdup(name)))
			break;
		(*n)++;
	}
	fclose(f);
	if (v)
		qsort(v, *n, sizeof(*v), str_cmp);
	return v;
}

static bool is_own(const char *name)
{
	for (size_t i = 0; i < sizeof(kfunc_own) / sizeof(kfunc_own[0]); i++)
		if (!fnmatch(kfunc_own[i], name, 0))
			return true;
	return false;
}

/* The most arguments BTF gives any of the (sorted) sites, or 6 when one
 * has no BTF: one pass over vmlinux's types. */
/* kwild_nargs()'s walk: the sites found so far and their most arguments. */
struct kwild_walk {
	const struct probe *p;
	size_t found;
	int max;
};

static int kwild_one(const char *name, int nargs, void *ctx)
{
	struct kwild_walk *w = ctx;

	if (bsearch(&name, w->p->sites, w->p->nsites, sizeof(*w->p->sites), str_cmp)) {
		w->found++;
		if (nargs > w->max)
			w->max = nargs;
	}
	return 0;
}

static int kwild_nargs(const struct probe *p)
{
	struct kbtf *btf = kbtf_open();
	struct kwild_walk w = { p, 0, 0 };

	if (!btf)
		return 6;
	kbtf_each_func(btf, kwild_one, &w);
	kbtf_free(btf);
	return w.found < p->nsites || w.max > 6 ? 6 : w.max;
}

/*
 * kernel.function("vfs_*"), kernel.function("*"): the functions ftrace
 * can trace (available_filter_functions: notrace ones are not there)
 * whose name matches, each name once, less the kprobes blacklist and
 * fay's own (kfunc_own); one kprobe.multi link for all of them, function
 * i carrying i as its cookie (s.name).  A name the kernel has twice
 * (static functions of two files) is probed at the first.
 */
static int kwild_resolve(struct probe *p)
{
	const char *dir = tracefs_dir();
	char path[512], line[512], **bl = NULL;
	size_t nbl = 0, cap = 0, nown = 0, nblack = 0, k = 0, matched = 0;
	int multi_err;
	FILE *f;

	if (!dir)
		return probe_fail(p, -errno, "kernel.function(\"%s\"): no tracefs to list "
				  "the kernel's functions in: %s", p->spec, errstr(-errno));
	snprintf(path, sizeof(path), "%s/available_filter_functions", dir);
	if (!(f = fopen(path, "re")))
		return probe_fail(p, -errno, "kernel.function(\"%s\"): cannot read %s: %s%s",
				  p->spec, path, errstr(-errno), errno == EPERM ?
				  " (the kernel does not let this process list its traceable "
				  "functions: lockdown, or ftrace is off)" : "");
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, " \t\n")] = '\0';	/* "name [module]" */
		if (fnmatch(p->spec, line, 0))
			continue;
		if (p->nsites == cap) {
			char **nv = realloc(p->sites, (cap = cap ? 2 * cap : 256) * sizeof(*nv));

			if (!nv) {
				fclose(f);
				return -ENOMEM;
			}
			p->sites = nv;
		}
		if (!(p->sites[p->nsites] = strdup(line))) {
			fclose(f);
			return -ENOMEM;
		}
		p->nsites++;
	}
	fclose(f);
	if (p->nsites)
		qsort(p->sites, p->nsites, sizeof(*p->sites), str_cmp);
	for (size_t i = 0; i < p->nsites; i++) {	/* each name once */
		if (k && !strcmp(p->sites[k - 1], p->sites[i]))
			free(p->sites[i]);
		else
			p->sites[k++] = p->sites[i];
	}
	p->nsites = matched = k;
	k = 0;
	bl = kprobe_blacklist(&nbl);
	for (size_t i = 0; i < p->nsites; i++) {
		char *s = p->sites[i];

		if (nbl && bsearch(&s, bl, nbl, sizeof(*bl), str_cmp)) {
			nblack++;
			free(s);
		} else if (is_own(s)) {
			nown++;
			free(s);
		} else {
			p->sites[k++] = s;
		}
	}
	p->nsites = k;
	for (size_t i = 0; i < nbl; i++)
		free(bl[i]);
	free(bl);
	if (!p->nsites && matched)
		return probe_fail(p, -ENOENT, "kernel.function(\"%s\"): the %zu functions it "
				  "matches may not be traced: %zu in the kernel's kprobes "
				  "blacklist, %zu fay's own probe runs through", p->spec,
				  matched, nblack, nown);
	if (!p->nsites)
		return probe_fail(p, -ENOENT, "kernel.function(\"%s\"): no traceable kernel "
				  "function matches (none in %s; see `fay probes "
				  "'kernel.function:%s'`)", p->spec, path, p->spec);
	if (p->nsites > KFUNC_MAX_SITES)
		return probe_fail(p, -E2BIG, "kernel.function(\"%s\") matches %zu traceable "
				  "functions, more than the %d one probe attaches to: name "
				  "fewer", p->spec, p->nsites, KFUNC_MAX_SITES);
	p->prog_type = BPF_PROG_TYPE_KPROBE;
	multi_err = kmulti_try();
	if (!multi_err) {
		p->attach_type = BPF_TRACE_KPROBE_MULTI;
		p->mech = is_exit(p) ? "kretprobe.multi" : "kprobe.multi";
	} else {
		int kp_type = perf_pmu_type("kprobe");

		if (kp_type < 0)
			return probe_fail(p, -EOPNOTSUPP, "kernel.function(\"%s\"): this "
					  "kernel has neither kprobe.multi links (%s) nor "
					  "kprobes (no kprobe PMU)", p->spec, errstr(multi_err));
		if (p->nsites > KFUNC_MAX_KPROBES)
			return probe_fail(p, -E2BIG, "kernel.function(\"%s\") matches %zu "
					  "traceable functions; this kernel has no kprobe.multi "
					  "links (%s: Linux 5.18 with CONFIG_FPROBE), and one "
					  "kprobe per function is at most %d: name fewer",
					  p->spec, p->nsites, errstr(multi_err),
					  KFUNC_MAX_KPROBES);
		p->pmu_type = kp_type;
		p->pmu_retbit = is_exit(p) ? perf_pmu_bit("kprobe", "retprobe") : 0;
		if (p->pmu_retbit < 0)
			return probe_fail(p, p->pmu_retbit, "kretprobe: the kprobe "
					  "PMU has no retprobe format bit");
		p->mech = is_exit(p) ? "kretprobe" : "kprobe";
	}
	p->nargs = is_exit(p) ? 0 : kwild_nargs(p);
	snprintf(p->desc, sizeof(p->desc), "%s %.300s (%zu functions", p->mech, p->spec,
		 p->nsites);
	if (nblack || nown)
		snprintf(p->desc + strlen(p->desc), sizeof(p->desc) - strlen(p->desc),
			 "; %zu left out: %zu kprobes blacklist, %zu fay's own", nblack + nown,
			 nblack, nown);
	snprintf(p->desc + strlen(p->desc), sizeof(p->desc) - strlen(p->desc), ")");
	return 0;
}

static int kfunc_resolve(struct probe *p)
{
	struct kbtf *btf;
	uint32_t id = 0;
	int fentry_err = -ENOENT, kp_type;
	bool exists;

	if (!*p->spec || strchr(p->spec, ' '))
		return probe_fail(p, -EINVAL, "kernel.function(\"%s\"): not a "
				  "function name", p->spec);
	if (strpbrk(p->spec, "*?["))
		return kwild_resolve(p);
	btf = kbtf_open();
	if (btf) {
		int n = kbtf_func(btf, p->spec, &id);

		if (n != -ENOENT)
			p->nargs = n;
		kbtf_free(btf);
	}
	exists = id > 0 || in_kallsyms(p->spec);
	if (!exists)
		return probe_fail(p, -ENOENT, "kernel.function(\"%s\"): no such "
				  "kernel function (not in BTF nor /proc/kallsyms; "
				  "see `fay probes 'kernel.function:%s*'`)",
				  p->spec, p->spec);
	if (id > 0 && !p->opts.no_fentry) {
		p->attach_btf_id = (uint32_t)id;
		p->attach_type = is_exit(p) ? BPF_TRACE_FEXIT : BPF_TRACE_FENTRY;
		fentry_err = fentry_try(p);
		if (!fentry_err) {
			p->prog_type = BPF_PROG_TYPE_TRACING;
			p->mech = is_exit(p) ? "fexit" : "fentry";
			snprintf(p->desc, sizeof(p->desc), "%s %s", p->mech, p->spec);
			return 0;
		}
		p->attach_btf_id = 0;
		p->attach_type = 0;
	}
	/* Read the PMU now: attaching must not read files, or a probe on
	 * vfs_read would see its own set-up. */
	kp_type = perf_pmu_type("kprobe");
	if (kp_type >= 0) {
		p->pmu_type = kp_type;
		p->pmu_retbit = is_exit(p) ? perf_pmu_bit("kprobe", "retprobe") : 0;
		if (p->pmu_retbit < 0)
			return probe_fail(p, p->pmu_retbit, "kretprobe: the kprobe "
					  "PMU has no retprobe format bit");
		p->prog_type = BPF_PROG_TYPE_KPROBE;
		p->mech = is_exit(p) ? "kretprobe" : "kprobe";
		if (p->nargs < 0 || p->nargs > 6)
			p->nargs = 6;
		snprintf(p->desc, sizeof(p->desc), "%s %s", p->mech, p->spec);
		return 0;
	}
	if (!bpf_have_privileges())
		return probe_fail(p, -EPERM, "kernel.function(\"%s\"): %s", p->spec,
				  bpf_privilege_hint());
	return probe_fail(p, -EOPNOTSUPP, "kernel.function(\"%s\"): this kernel "
			  "allows neither fentry/fexit (%s) nor kprobes (no kprobe "
			  "PMU: the kernel is built without CONFIG_KPROBES)",
			  p->spec, p->opts.no_fentry ? "not tried" :
			  id <= 0 ? "no BTF for it" : errstr(fentry_err));
}

static int kfunc_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n)
{
	if (p->prog_type == BPF_PROG_TYPE_TRACING) {
		ir_load(ir, dst, IR_R(ir_ctx(ir)), 8 * n, 8, 0);
		return 0;
	}
	if (is_exit(p))
		return probe_fail(p, -EOPNOTSUPP, "arg(%d): a kretprobe does not "
				  "see the arguments (pair it with the entry)", n);
	emit_pt_regs(ir, dst, kprobe_arg_regs[n]);
	return 0;
}

static int kfunc_emit_ret(struct probe *p, struct ir *ir, ir_reg dst)
{
	if (!is_exit(p))
		return probe_fail(p, -EOPNOTSUPP, "ret: %s is a function entry",
				  p->desc);
	if (p->prog_type == BPF_PROG_TYPE_TRACING)
		ir_load(ir, dst, IR_R(ir_ctx(ir)), 8 * p->nargs, 8, 0);
	else
		emit_pt_regs(ir, dst, PT_AX);
	return 0;
}

static int kfunc_attach(struct probe *p, int prog_fd)
{
	struct perf_event_attr attr = { 0 };
	size_t refused = 0, first = 0;
	int fd;

	if (p->attach_type == BPF_TRACE_KPROBE_MULTI) {
		fd = bpf_kprobe_multi_link(prog_fd, (const char *const *)p->sites,
					   p->nsites, is_exit(p));
		if (fd == -EOPNOTSUPP || fd == -EINVAL)
			return probe_fail(p, fd, "cannot attach %s: this kernel has no "
					  "kprobe.multi links (Linux 5.18 with CONFIG_FPROBE): "
					  "%s", p->desc, errstr(fd));
		if (fd == -ESRCH || fd == -ENOENT)
			return probe_fail(p, fd, "cannot attach %s: the kernel could not "
					  "find one of the functions by name (%s; a module "
					  "unloaded since?)", p->desc, errstr(fd));
		if (fd < 0)
			return fd;
		return probe_keep_fd(p, fd);
	}
	for (size_t i = 0; i < p->nsites; i++) {	/* a wildcard, one kprobe each */
		int err;
		size_t before = p->nfds;

		memset(&attr, 0, sizeof(attr));
		attr.type = (uint32_t)p->pmu_type;
		attr.config1 = (uint64_t)(uintptr_t)p->sites[i];
		if (is_exit(p))
			attr.config |= 1ull << p->pmu_retbit;
		attr.sample_period = 1;
		attr.wakeup_events = 1;
		err = perf_attach_bpf_cookie(p, &attr, -1, 0, prog_fd, i);
		/* a function the kprobe code refuses (its own blacklist
		 * when debugfs did not show it, an __init function gone) */
		if (err == -EINVAL || err == -ENOENT || err == -EADDRNOTAVAIL) {
			while (p->nfds > before)
				close(p->fds[--p->nfds]);
			if (!refused++)
				first = i;
			continue;
		}
		if (err)
			return probe_fail(p, err, "cannot attach %s at %s: %s", p->desc,
					  p->sites[i], errstr(err));
	}
	if (p->nsites && refused == p->nsites)
		return probe_fail(p, -EINVAL, "cannot attach %s: the kernel refused a kprobe "
				  "on every function (%s: %s, ...)", p->desc, p->sites[first],
				  "refused");
	if (refused)
		pr_warn("%s: the kernel refused a kprobe on %zu of the functions (%s, ...)",
			p->desc, refused, p->sites[first]);
	if (p->nsites)
		return 0;
	if (p->prog_type == BPF_PROG_TYPE_TRACING) {
		fd = bpf_raw_tp_link(prog_fd);
		if (fd < 0)
			return fd;
		return probe_keep_fd(p, fd);
	}
	attr.type = (uint32_t)p->pmu_type;
	attr.config1 = (uint64_t)(uintptr_t)p->spec;	/* kprobe_func */
	attr.config2 = 0;				/* offset */
	if (is_exit(p))
		attr.config |= 1ull << p->pmu_retbit;
	attr.sample_period = 1;
	attr.wakeup_events = 1;
	fd = perf_attach_bpf(&attr, -1, 0, prog_fd);
	if (fd < 0)
		return fd;
	return probe_keep_fd(p, fd);
}

const struct provider provider_kfunc = {
	.name = "kfunc",
	.resolve = kfunc_resolve,
	.emit_arg = kfunc_emit_arg,
	.emit_ret = kfunc_emit_ret,
	.attach = kfunc_attach,
};
