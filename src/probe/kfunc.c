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
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf/insn.h"
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
	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = p->attach_type,
		    .attach_btf_id = p->attach_btf_id);
	struct bpf_insn insns[] = { MOV64_IMM(BPF_REG_0, 0), EXIT_INSN() };
	int fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "fay_try", "GPL", insns, 2, &o);

	if (fd < 0)
		return -errno;
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

static int kfunc_resolve(struct probe *p)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int id = -ENOENT, fentry_err = -ENOENT, kp_type;
	bool exists;

	if (!*p->spec || strchr(p->spec, ' '))
		return probe_fail(p, -EINVAL, "kernel.function(\"%s\"): not a "
				  "function name", p->spec);
	if (btf) {
		id = btf__find_by_name_kind(btf, p->spec, BTF_KIND_FUNC);
		if (id > 0) {
			const struct btf_type *fn = btf__type_by_id(btf, id);
			const struct btf_type *proto = btf__type_by_id(btf, fn->type);

			p->nargs = proto ? btf_vlen(proto) : -1;
		}
		btf__free(btf);
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
	int fd;

	if (p->prog_type == BPF_PROG_TYPE_TRACING) {
		fd = bpf_raw_tracepoint_open(NULL, prog_fd);
		if (fd < 0)
			return -errno;
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
