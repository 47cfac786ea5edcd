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
#include <unistd.h>

#include "common/log.h"
#include "common/tracefs.h"
#include "probe/provider.h"

static bool is_raw_syscalls(const struct probe *p)
{
	return p->kind != PROBE_TRACEPOINT && !strcmp(p->spec, "*");
}

/* A wildcard's events: the tracepoint id of p->sites[i]. */
struct tpwild {
	int *ids;
	bool full;		/* names are "sys:event" */
	struct probe *p;
};

static int tpwild_one(const char *sys, const char *event, void *arg)
{
	struct tpwild *w = arg;
	struct probe *p = w->p;
	struct probe_field *fs;
	size_t nf;
	char name[512];
	int err, id;

	err = tracefs_format(sys, event, &fs, &nf, &id);
	if (err)
		return probe_fail(p, err, "tracepoint(\"%s\"): cannot read the format "
				  "of %s:%s: %s", p->spec, sys, event, errstr(err));
	free(fs);
	snprintf(name, sizeof(name), "%s:%s", sys, event);
	if (!(p->sites[p->nsites] = strdup(w->full ? name : event)))
		return -ENOMEM;
	w->ids[p->nsites++] = id;
	return 0;
}

/* "sched:*", "syscalls:sys_enter_*", "*:*_exec": every event tracefs
 * lists that matches (tracefs_glob()); one perf event each, all running
 * the one program, each through a BPF link carrying its index as the
 * cookie (s.name).  The fields a query may read are the ones all the
 * events share (the query front end checks that): the probe has none. */
static int tpwild_resolve(struct probe *p, const char *sys, const char *event)
{
	struct tpwild *w = calloc(1, sizeof(*w));
	const char *dir = tracefs_dir();
	int n = 0, err;

	if (!w)
		return -ENOMEM;
	p->priv = w;
	w->p = p;
	w->full = strpbrk(sys, "*?[") != NULL;
	if (!dir)
		return probe_fail(p, -errno, "tracepoint(\"%s\"): no tracefs: %s", p->spec,
				  errstr(-errno));
	err = tracefs_glob(dir, sys, event, NULL, NULL, &n);
	if (err == -E2BIG)
		return probe_fail(p, err, "tracepoint(\"%s\") matches %d events, more than "
				  "the %d one probe attaches to: name fewer", p->spec, n,
				  TRACEFS_GLOB_MAX);
	if (err < 0)
		return probe_fail(p, err, "tracepoint(\"%s\"): cannot list %s/available_events: "
				  "%s", p->spec, dir, errstr(err));
	if (!n)
		return probe_fail(p, -ENOENT, "no tracepoint matches \"%s\" in "
				  "%s/available_events (see `fay probes '%s'`)", p->spec,
				  dir, p->spec);
	if (!(p->sites = calloc((size_t)n, sizeof(*p->sites))) ||
	    !(w->ids = calloc((size_t)n, sizeof(*w->ids))))
		return -ENOMEM;
	err = tracefs_glob(dir, sys, event, tpwild_one, w, &n);
	if (err < 0)
		return err;
	if ((size_t)n != p->nsites)
		return probe_fail(p, -EAGAIN, "tracepoint(\"%s\"): the events changed while "
				  "they were read", p->spec);
	snprintf(p->desc, sizeof(p->desc), "tracepoint %.400s (%zu events)", p->spec,
		 p->nsites);
	p->prog_type = BPF_PROG_TYPE_TRACEPOINT;
	p->mech = "tracepoint";
	p->nargs = 0;
	return 0;
}

static void tp_release(struct probe *p)
{
	struct tpwild *w = p->priv;

	if (w)
		free(w->ids);
	free(w);
	p->priv = NULL;
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
		if (strpbrk(p->spec, "*?["))
			return tpwild_resolve(p, sys, event);
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
	const struct tpwild *w = p->priv;
	size_t refused = 0, first = 0;
	int fd, first_err = 0;

	for (size_t i = 0; w && i < p->nsites; i++) {
		size_t before = p->nfds;
		int err;

		attr.config = (uint64_t)w->ids[i];
		err = perf_attach_bpf_cookie(p, &attr, -1, 0, prog_fd, i);
		/* an event this kernel keeps from BPF programs (EPERM on
		 * some irq_vectors events under a hypervisor's policy) is
		 * left out, said once; the others run */
		if (err == -EPERM || err == -EINVAL || err == -EOPNOTSUPP) {
			while (p->nfds > before)
				close(p->fds[--p->nfds]);
			if (!refused++) {
				first = i;
				first_err = err;
			}
			continue;
		}
		if (err)
			return probe_fail(p, err, "cannot attach %s to %s: %s", p->desc,
					  p->sites[i], errstr(err));
	}
	if (w && refused == p->nsites)
		return probe_fail(p, first_err, "cannot attach %s: the kernel refused every "
				  "event (%s: %s, ...)", p->desc, p->sites[first],
				  errstr(first_err));
	if (refused)
		pr_warn("%s: the kernel refused %zu of the events, left out (%s: %s, ...)",
			p->desc, refused, p->sites[first], errstr(first_err));
	if (w)
		return 0;
	fd = perf_attach_bpf(&attr, -1, 0, prog_fd);

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
	.release = tp_release,
};
