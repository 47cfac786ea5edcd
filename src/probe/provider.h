/* SPDX-License-Identifier: MIT */
/*
 * The provider vtable: one per probe mechanism, each filling only the
 * slots it needs (as ply's struct provider).  probe.c dispatches; a slot
 * left NULL means "this kind has none of that" (-EOPNOTSUPP).
 */
#ifndef FAY_PROBE_PROVIDER_H
#define FAY_PROBE_PROVIDER_H

#include <stdarg.h>

#include "bpf/insn.h"
#include "probe/probe.h"

struct probe;

struct provider {
	const char *name;
	/* Resolve p->spec; fill p->prog_type etc.  Errors via probe_fail(). */
	int (*resolve)(struct probe *p);
	int (*emit_arg)(struct probe *p, struct ir *ir, ir_reg dst, int n);
	int (*emit_ret)(struct probe *p, struct ir *ir, ir_reg dst);
	int (*emit_field)(struct probe *p, struct ir *ir, ir_reg dst,
			  const char *name);
	int (*attach)(struct probe *p, int prog_fd);
	/* Release what resolve() allocated (attachments are perf fds,
	 * closed by probe.c). */
	void (*release)(struct probe *p);
};

/* x86-64 struct pt_regs offsets: the uprobe/kprobe context. */
enum {
	PT_R15 = 0, PT_R14 = 8, PT_R13 = 16, PT_R12 = 24, PT_BP = 32,
	PT_BX = 40, PT_R11 = 48, PT_R10 = 56, PT_R9 = 64, PT_R8 = 72,
	PT_AX = 80, PT_CX = 88, PT_DX = 96, PT_SI = 104, PT_DI = 112,
	PT_ORIG_AX = 120, PT_IP = 128, PT_CS = 136, PT_FLAGS = 144,
	PT_SP = 152, PT_SS = 160,
};

struct probe {
	const struct provider *prov;
	enum probe_kind kind;
	char *spec;
	struct probe_opts opts;
	const char *mech;
	char desc[512];
	char err[512];

	/* Program options. */
	enum bpf_prog_type prog_type;
	enum bpf_attach_type attach_type;
	uint32_t attach_btf_id;
	int nargs;

	/* Attachments: perf event or link fds, closed on detach. */
	int *fds;
	size_t nfds;

	/* Provider data. */
	struct probe_field *fields;	/* tracepoints */
	size_t nfields;
	int tp_id;
	char path[4096];		/* uprobes/usdt: the binary */
	uint64_t offset;		/* uprobe: file offset */
	int pmu_type;			/* kprobe/uprobe PMU, read at resolve */
	int pmu_retbit;			/* its "retprobe" config bit */
	void *priv;
	/* uprobes in every process on a library by its short name: the
	 * other files of that name mapped on the host (containers' copies),
	 * each probed too (uprobe.c) */
	struct probe_file *more;
	size_t nmore, more_cap;
	size_t nfiles_capped;		/* files left out at UPROBE_MAX_FILES */
	/* a uprobe on one process that follows its descendants: each
	 * (descendant, file) it is on (probe_follow_child()) */
	struct probe_kid *kids;
	size_t nkids, kids_cap;
	int prog_fd;			/* the program probe_attach() attached (not owned) */
	/* a wildcard: the name of each function or event it matched, whose
	 * attachment carries its index as the BPF cookie (freed by
	 * probe_free()) */
	char **sites;
	size_t nsites;
};

struct probe_kid {
	pid_t pid;
	dev_t dev;
	ino_t ino;
};

struct probe_file {
	char *path;
	uint64_t offset;
	dev_t dev;			/* the file, as stat() of path saw it */
	ino_t ino;
};

/* Set p->err (printf-style) and return err. */
int probe_fail(struct probe *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Remember an attachment fd to close on detach.  0 or -ENOMEM (fd
 * closed). */
int probe_keep_fd(struct probe *p, int fd);

/* perf_event_open() for a PMU event with this program: attr filled by
 * the caller except the common parts.  Returns the fd or -errno. */
struct perf_event_attr;
int perf_attach_bpf(struct perf_event_attr *attr, pid_t pid, int cpu, int prog_fd);
/* The same through a BPF link carrying cookie; both fds are kept with
 * probe_keep_fd().  0 or -errno. */
int perf_attach_bpf_cookie(struct probe *p, struct perf_event_attr *attr, pid_t pid,
			   int cpu, int prog_fd, uint64_t cookie);
/* The dynamic PMU type of /sys/bus/event_source/devices/NAME, or -errno. */
int perf_pmu_type(const char *name);
/* Bit position of FIELD in the PMU's format (e.g. "retprobe"), or -errno. */
int perf_pmu_bit(const char *pmu, const char *field);

/* Load a pt_regs slot (uprobe, kprobe, perf_event context). */
void emit_pt_regs(struct ir *ir, ir_reg dst, int off);

extern const struct provider provider_tracepoint;
extern const struct provider provider_kfunc;
extern const struct provider provider_uprobe;
extern const struct provider provider_usdt;
extern const struct provider provider_profile;

#endif
