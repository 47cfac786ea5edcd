// SPDX-License-Identifier: MIT
/*
 * Tracepoints and syscalls.  The context of a BPF_PROG_TYPE_TRACEPOINT
 * program is the event's record as its tracefs format file lays it out;
 * syscall(X) is the tracepoint pair syscalls:sys_enter_X / sys_exit_X and
 * syscall("*") is raw_syscalls:sys_enter / sys_exit.  Attachment is a
 * perf tracepoint event with the program set on it: a single event on CPU
 * 0 runs the program for hits on every CPU (the BPF hook sits before
 * perf's per-CPU filtering).
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "probe/provider.h"

static bool is_raw_syscalls(const struct probe *p)
{
	return p->kind != PROBE_TRACEPOINT && !strcmp(p->spec, "*");
}

static int tp_resolve(struct probe *p)
{
	char sys[128], event[256];
	int err;

	if (p->kind == PROBE_TRACEPOINT) {
		const char *colon = strchr(p->spec, ':');

		if (!colon || colon == p->spec || !colon[1] ||
		    (size_t)(colon - p->spec) >= sizeof(sys))
			return probe_fail(p, -EINVAL, "tracepoint \"%s\": expected "
					  "\"subsystem:event\"", p->spec);
		snprintf(sys, sizeof(sys), "%.*s", (int)(colon - p->spec), p->spec);
		snprintf(event, sizeof(event), "%s", colon + 1);
	} else if (is_raw_syscalls(p)) {
		snprintf(sys, sizeof(sys), "raw_syscalls");
		snprintf(event, sizeof(event), "%s",
			 p->kind == PROBE_SYSCALL ? "sys_enter" : "sys_exit");
	} else {
		snprintf(sys, sizeof(sys), "syscalls");
		snprintf(event, sizeof(event), "%s_%s",
			 p->kind == PROBE_SYSCALL ? "sys_enter" : "sys_exit", p->spec);
	}
	err = tracefs_format(sys, event, &p->fields, &p->nfields, &p->tp_id);
	if (err == -ENOENT && p->kind != PROBE_TRACEPOINT)
		return probe_fail(p, err, "no syscall \"%s\" on this kernel (no "
				  "tracepoint %s:%s)", p->spec, sys, event);
	if (err == -ENOENT)
		return probe_fail(p, err, "no tracepoint \"%s\" on this kernel "
				  "(see `fay probes '%s:*'`)", p->spec, sys);
	if (err)
		return probe_fail(p, err, "cannot read the format of %s:%s: %s%s",
				  sys, event, errstr(err), err == -EACCES ||
				  err == -EPERM ? " (/sys/kernel/tracing is root's: run fay as root, or give it CAP_DAC_READ_SEARCH besides CAP_BPF and CAP_PERFMON, as dist/systemd/fay-agent.service does)" : "");
	snprintf(p->desc, sizeof(p->desc), "tracepoint %s:%s", sys, event);
	p->prog_type = BPF_PROG_TYPE_TRACEPOINT;
	p->mech = "tracepoint";
	if (is_raw_syscalls(p))
		p->nargs = p->kind == PROBE_SYSCALL ? 6 : 0;
	else if (p->kind == PROBE_SYSCALL)
		p->nargs = (int)p->nfields - 1;	/* all but __syscall_nr */
	else if (p->kind == PROBE_SYSCALL_EXIT)
		p->nargs = 0;
	else
		p->nargs = (int)p->nfields;
	return 0;
}

static const struct probe_field *field_named(const struct probe *p, const char *name)
{
	for (size_t i = 0; i < p->nfields; i++)
		if (!strcmp(p->fields[i].name, name))
			return &p->fields[i];
	return NULL;
}

static int load_field(struct probe *p, struct ir *ir, ir_reg dst,
		      const struct probe_field *f)
{
	if (f->is_array || bpf_size_code((unsigned int)f->size) < 0)
		return probe_fail(p, -EOPNOTSUPP, "field %s (%s) of %s is not a "
				  "scalar", f->name, f->type, p->desc);
	ir_load(ir, dst, IR_R(ir_ctx(ir)), f->offset, (unsigned int)f->size,
		f->is_signed ? IR_SIGNED : 0);
	return 0;
}

static int tp_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n)
{
	const struct probe_field *f;

	if (is_raw_syscalls(p)) {
		f = field_named(p, "args");
		if (!f)
			return probe_fail(p, -ENOENT, "%s has no args field", p->desc);
		ir_load(ir, dst, IR_R(ir_ctx(ir)), f->offset + 8 * n, 8, 0);
		return 0;
	}
	/* syscalls:sys_enter_X: the arguments follow __syscall_nr. */
	if (p->kind == PROBE_SYSCALL)
		n++;
	return load_field(p, ir, dst, &p->fields[n]);
}

static int tp_emit_ret(struct probe *p, struct ir *ir, ir_reg dst)
{
	const struct probe_field *f = field_named(p, "ret");

	if (p->kind != PROBE_SYSCALL_EXIT || !f)
		return probe_fail(p, -EOPNOTSUPP, "%s has no return value", p->desc);
	return load_field(p, ir, dst, f);
}

static int tp_emit_field(struct probe *p, struct ir *ir, ir_reg dst,
			 const char *name)
{
	const struct probe_field *f = field_named(p, name);

	if (!f) {
		char list[256] = "";
		size_t len = 0;

		for (size_t i = 0; i < p->nfields && len < sizeof(list); i++)
			len += snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", p->fields[i].name);
		return probe_fail(p, -ENOENT, "%s has no field \"%s\" (fields: %s)",
				  p->desc, name, list);
	}
	return load_field(p, ir, dst, f);
}

static int tp_attach(struct probe *p, int prog_fd)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT,
		.config = (uint64_t)p->tp_id,
		.sample_period = 1,
		.wakeup_events = 1,
	};
	int fd = perf_attach_bpf(&attr, -1, 0, prog_fd);

	if (fd < 0)
		return fd;
	return probe_keep_fd(p, fd);
}

const struct provider provider_tracepoint = {
	.name = "tracepoint",
	.resolve = tp_resolve,
	.emit_arg = tp_emit_arg,
	.emit_ret = tp_emit_ret,
	.emit_field = tp_emit_field,
	.attach = tp_attach,
};
