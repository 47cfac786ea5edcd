// SPDX-License-Identifier: MIT
/*
 * The engine's load (verifier diagnostics mapped to the query), attach
 * (exit before entry, so no recorded entry misses its exit), detach, and
 * streamed records through a BPF ring buffer or a perf buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine_int.h"

/* ---- load and attach ----------------------------------------------------- */

/* Report a verifier rejection at line:col of the query. */
static int verifier_error(struct engine *e, struct eprog *ep, struct bprog_diag *d)
{
	const char *text = query_text(e->q), *w = strstr(d->msg, "program: ");
	struct loc loc = { .line = (int)d->line, .col = (int)d->col };
	char why[sizeof(d->msg)], *insn;
	int line = 1;

	snprintf(why, sizeof(why), "%s", w ? w + 9 : d->msg);
	insn = strstr(why, " (insn ");
	if (insn)
		*insn = '\0';	/* we say which instruction ourselves */
	for (const char *s = text; *s && line < loc.line; s++) {
		loc.off++;
		if (*s == '\n')
			line++;
	}
	loc.off += loc.col - 1;
	loc.start = loc.off;
	loc.end = loc.off + 1;
	if (d->log)
		pr_debug("verifier log of the %s program:\n%s",
			 ep->role == EP_ENTRY ? "entry" : "exit", d->log);
	if (d->line) {
		query_errorf(e->q, &loc, "the BPF verifier rejected the code for this (%s program, instruction %d): %s",
			     ep->role == EP_ENTRY ? "entry" : "exit", d->insn, why);
		return engine_fail(e, -EINVAL, "%s", query_error(e->q));
	}
	return engine_fail(e, d->err ? d->err : -EINVAL,
			   "the BPF verifier rejected the %s program (%s): %s%s",
			   ep->role == EP_ENTRY ? "entry" : "exit", engine_ep_title(ep),
			   d->msg, d->log ? " (FAY_LOG_LEVEL=debug shows its log)" : "");
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct engine *e = ctx;

	if (!e->rec_fn || size < (size_t)e->p->record_size)
		return 0;
	if (e->p->names || e->p->cgroups) {	/* s.name, s.cgroup: the probe wrote an id */
		unsigned char rec[PLAN_RECORD_MAX];

		memcpy(rec, data, (size_t)e->p->record_size);
		plan_names_record(e->p, rec);
		e->rec_fn(e->rec_ctx, rec, (size_t)e->p->record_size);
		return 0;
	}
	e->rec_fn(e->rec_ctx, data, (size_t)e->p->record_size);
	return 0;
}

static void on_lost(void *ctx, int cpu, uint64_t n)
{
	struct engine *e = ctx;

	(void)cpu;
	e->user_lost += n;
}

int engine_load(struct engine *e)
{
	int err;

	if (e->loaded)
		return 0;
	if (engine_is_vm(e)) {
		err = engine_vm_load(e);
		e->loaded = !err;
		return err;
	}
	if (!bpf_have_privileges())
		return engine_fail(e, -EPERM, "running a query loads BPF programs: %s",
				   bpf_privilege_hint());
	for (int i = 0; i < e->nprogs; i++) {
		err = engine_resolve(e, &e->progs[i]);
		if (err)
			return err;
	}
	for (int i = 0; i < e->nprogs; i++) {
		struct eprog *ep = &e->progs[i];
		struct bprog_opts o;
		struct bprog_diag d;

		probe_prog_opts(ep->probe, &o);
		ep->prog = bprog_load(ep->ir, &o, &d);
		if (!ep->prog) {
			if (d.err != -EPERM && d.insn >= 0)
				err = verifier_error(e, ep, &d);
			else
				err = engine_fail(e, d.err ? d.err : -errno, "%s", d.msg);
			bprog_diag_clear(&d);
			return err;
		}
		pr_debug("loaded %s (prog id %u)", probe_describe(ep->probe),
			 bprog_id(ep->prog));
	}
	err = bmap_create(e->counters);
	if (!err && e->vals)
		err = bmap_create(e->vals);
	if (err)
		return engine_fail(e, err, "cannot create a map: %s", errstr(err));
	if (e->out) {
		e->out_rd = brbuf_new(e->out, ENGINE_PERF_PAGES, on_record, on_lost, e);
		if (!e->out_rd)
			return engine_fail(e, -errno, "cannot map the %s: %s", e->use_ringbuf ?
					   "ring buffer" : "perf buffers", errstr(-errno));
	}
	if (!e->opts.hold_execs)	/* (-c: made at its exec, held) */
		engine_ustack_update(e, e->opts.pid);
	e->loaded = true;
	return 0;
}

int engine_attach(struct engine *e)
{
	int err;

	if (!e->loaded)
		return engine_fail(e, -EINVAL, "internal: attach before load");
	if (e->inl)
		return engine_inl_attach(e, engine_vm_inline(e));
	if (e->vm) {		/* open to engine_span_feed() */
		e->attached = true;
		return 0;
	}
	/* exit first: every entry recorded from now on finds its exit */
	for (int i = e->nprogs - 1; i >= 0; i--) {
		struct eprog *ep = &e->progs[i];

		err = probe_attach(ep->probe, bprog_fd(ep->prog));
		if (err) {
			engine_inl_release(e);
			engine_detach(e);
			if (err == -EACCES && ep->at->kind == PA_TRACEPOINT)
				return engine_fail(e, err, "%s: the program reads past the end of "
						   "the event's record (a field offset the format file "
						   "gave; is it this kernel's?)",
						   probe_strerror(ep->probe));
			return engine_fail(e, err, "%s", probe_strerror(ep->probe));
		}
	}
	e->attached = true;
	engine_inl_release(e);	/* a held program runs on: the uprobe is there */
	engine_exec_start(e);	/* without it (warned), what is probed now stays */
	return 0;
}

void engine_detach(struct engine *e)
{
	engine_exec_free(e);
	engine_inl_detach(e);
	for (int i = 0; i < e->nprogs; i++)
		if (e->progs[i].probe)
			probe_detach(e->progs[i].probe);
	e->attached = false;
}

int engine_nprobes(const struct engine *e)
{
	return e->nprogs;
}

const char *engine_probe_desc(const struct engine *e, int i)
{
	if (i < 0 || i >= e->nprogs)
		return NULL;
	if (e->progs[i].at->kind == PA_SPANS)
		return e->progs[i].spec;
	if (e->inl)
		return i ? "exit" : engine_inl_desc(e);
	return engine_ep_title(&e->progs[i]);
}

uint32_t engine_prog_id(const struct engine *e, int i)
{
	if (i < 0 || i >= e->nprogs || !e->progs[i].prog)
		return 0;
	return bprog_id(e->progs[i].prog);
}

/* ---- streaming ---------------------------------------------------------------- */

int engine_set_record_fn(struct engine *e, engine_record_fn fn, void *ctx)
{
	e->rec_fn = fn;
	e->rec_ctx = ctx;
	return 0;
}

int engine_stream_fd(const struct engine *e)
{
	if (e->vm)
		return engine_vm_stream_fd(e);
	return e->out_rd ? brbuf_fd(e->out_rd) : -1;
}

int engine_consume(struct engine *e)
{
	int n = 0;

	if (e->vm)
		return engine_vm_consume(e);
	if (e->out_rd)
		n = brbuf_consume(e->out_rd);
	return n;
}
