// SPDX-License-Identifier: MIT
/*
 * The engine's life: set-up (maps, probe points, code generation), load
 * (verifier diagnostics mapped to the query), attach (exit before entry,
 * so no recorded entry misses its exit), reading (per-CPU partials merged
 * with aggr_merge(), ordered, limited; streamed records through a BPF
 * ring buffer or a perf buffer) and tear-down (every attachment, program
 * and map closed, whatever path leads there).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "common/err.h"
#include "common/inline_wire.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "query/partial.h"

int engine_fail(struct engine *e, int err, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err) - 1, fmt, ap);
	va_end(ap);
	n = strlen(e->err);
	if (!n || e->err[n - 1] != '\n') {
		e->err[n] = '\n';
		e->err[n + 1] = '\0';
	}
	return err;
}

const char *engine_error(const struct engine *e)
{
	return e->err;
}

const struct plan *engine_plan(const struct engine *e)
{
	return e->p;
}

/* ---- set-up ---------------------------------------------------------------- */

static int eprog_setup(struct engine *e, struct eprog *ep,
		       const struct plan_attach *at, enum eprog_role role)
{
	const struct plan *p = e->p;
	int rc;

	ep->role = role;
	ep->at = at;
	ep->popts.sz = sizeof(ep->popts);
	ep->popts.no_fentry = e->opts.no_fentry;
	switch (at->kind) {
	case PA_TRACEPOINT:
		if (p->source == SRC_SYSCALL) {
			ep->kind = role == EP_ENTRY ? PROBE_SYSCALL : PROBE_SYSCALL_EXIT;
			snprintf(ep->spec, sizeof(ep->spec), "%s", p->target);
		} else {
			ep->kind = PROBE_TRACEPOINT;
			snprintf(ep->spec, sizeof(ep->spec), "%s:%s", at->sys, at->event);
		}
		break;
	case PA_FENTRY:
	case PA_FEXIT:
		ep->kind = at->kind == PA_FENTRY ? PROBE_KFUNC : PROBE_KFUNC_EXIT;
		snprintf(ep->spec, sizeof(ep->spec), "%s", at->func);
		break;
	case PA_UPROBE:
	case PA_URETPROBE:
		ep->kind = at->kind == PA_UPROBE ? PROBE_UPROBE : PROBE_URETPROBE;
		ep->popts.pid = at->pid > 0 ? at->pid : e->opts.pid;
		rc = engine_check_pid(e, ep, at->symbol);
		if (rc)
			return rc;
		if (at->binary) {
			snprintf(ep->spec, sizeof(ep->spec), "%s:%s", at->binary, at->symbol);
		} else {
			/* process(PID).function("sym"): its executable */
			char link[64], path[4096];
			ssize_t n;

			snprintf(link, sizeof(link), "/proc/%d/exe", at->pid);
			n = readlink(link, path, sizeof(path) - 1);
			if (n < 0)
				return engine_fail(e, -ESRCH, "process(%d): no such process (%s: %s)",
						   at->pid, link, strerror(errno));
			path[n] = '\0';
			snprintf(ep->spec, sizeof(ep->spec), "%s:%s", path, at->symbol);
		}
		break;
	case PA_USDT:
		ep->kind = PROBE_USDT;
		ep->popts.pid = e->opts.pid;
		rc = engine_check_pid(e, ep, at->name);
		if (rc)
			return rc;
		if (at->provider)
			snprintf(ep->spec, sizeof(ep->spec), "%s:%s:%s", at->binary,
				 at->provider, at->name);
		else
			snprintf(ep->spec, sizeof(ep->spec), "%s:%s", at->binary, at->name);
		break;
	case PA_PERF_SAMPLE:
		ep->kind = PROBE_PROFILE;
		ep->popts.hz = at->hz;
		snprintf(ep->spec, sizeof(ep->spec), "%u", at->hz);
		break;
	case PA_SPANS:		/* no probe: fed spans in the VM (spans.c) */
		if (p->target)
			snprintf(ep->spec, sizeof(ep->spec), "spans(\"%s\")", p->target);
		else
			snprintf(ep->spec, sizeof(ep->spec), "spans");
		break;
	default:
		return engine_fail(e, -EOPNOTSUPP, "this source cannot run on this host");
	}
	return 0;
}

int engine_resolve(struct engine *e, struct eprog *ep)
{
	char why[512];

	if (ep->probe)
		return 0;
	ep->probe = probe_new(ep->kind, ep->spec, &ep->popts, why, sizeof(why));
	if (!ep->probe)
		return engine_fail(e, -errno, "%s", why);
	return 0;
}

/* Code generation needs the probe itself for these kinds (how arguments
 * are read depends on fentry vs kprobe, on the USDT note). */
static bool needs_probe_for_codegen(const struct eprog *ep)
{
	return ep->kind == PROBE_KFUNC || ep->kind == PROBE_KFUNC_EXIT ||
	       ep->kind == PROBE_UPROBE || ep->kind == PROBE_URETPROBE ||
	       ep->kind == PROBE_USDT;
}

/* --emit on a kernel that refuses both fentry and kprobes: show the code
 * for fentry/fexit anyway (arguments from BTF), and say so. */
static int assume_fentry(struct engine *e, struct eprog *ep)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int id = btf ? btf__find_by_name_kind(btf, ep->spec, BTF_KIND_FUNC) : -ENOENT;

	snprintf(ep->why_not, sizeof(ep->why_not), "%.*s", (int)strcspn(e->err, "\n"),
		 e->err);
	if (id > 0) {
		const struct btf_type *fn = btf__type_by_id(btf, (uint32_t)id);
		const struct btf_type *proto = btf__type_by_id(btf, fn->type);

		ep->assume_fentry_nargs = proto ? btf_vlen(proto) : 0;
	}
	btf__free(btf);
	if (ep->assume_fentry_nargs < 0)
		return engine_fail(e, -EOPNOTSUPP, "%s", ep->why_not);
	e->err[0] = '\0';
	return 0;
}

static int make_maps(struct engine *e)
{
	const struct plan *p = e->p;
	uint32_t vsize = p->value_size > 0 ? (uint32_t)p->value_size : 8;

	e->counters = bmap_new("fay_counters", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8,
			       ENGINE_NCOUNTERS);
	if (!e->counters)
		return -errno;
	if (p->mode == PLAN_AGGREGATE) {
		e->epochs = p->window_ns > 0;
		if (e->epochs) {
			e->epoch = bmap_new("fay_epoch", BPF_MAP_TYPE_ARRAY, 4, 8, 1);
			if (!e->epoch)
				return -errno;
		}
		if (p->key_size || e->epochs) {
			/* Windowed: two windows' keys are there at once for a
			 * moment (keyless: one key per epoch); sampling maps
			 * are preallocated, so they get a margin, not twice. */
			uint32_t n = (uint32_t)p->max_entries;

			if (e->epochs)
				n = !p->key_size ? 8 : p->source == SRC_PROFILE ? n + 1024 : 2 * n;
			e->vals = bmap_new("fay_vals", BPF_MAP_TYPE_PERCPU_HASH,
					   (uint32_t)p->key_size + (e->epochs ? 8 : 0), vsize, n);
			e->zero = bmap_new("fay_zero", BPF_MAP_TYPE_ARRAY, 4, vsize, 1);
			if (!e->vals || !e->zero)
				return -errno;
			/* Keys are allocated as they appear: preallocating
			 * every key of every CPU costs start-up time (5 ms for
			 * 10240 small keys here) and memory (10240 keys of a
			 * 16 KiB value on 2 CPUs: 320 MiB), and a key is
			 * inserted once per window while it is looked up once
			 * per event.  Sampling programs run in NMI context and
			 * need preallocated maps. */
			if (p->source != SRC_PROFILE)
				bmap_set_flags(e->vals, BPF_F_NO_PREALLOC);
		} else {
			e->vals = bmap_new("fay_vals", BPF_MAP_TYPE_PERCPU_ARRAY, 4, vsize, 1);
		}
		if (!e->vals)
			return -errno;
	} else {
		if (e->use_ringbuf) {
			e->out = bmap_new("fay_out", BPF_MAP_TYPE_RINGBUF, 0, 0,
					  ENGINE_RINGBUF_SIZE);
		} else {
			int n = bpf_ncpus();

			e->out = bmap_new("fay_out", BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4,
					  (uint32_t)(n > 0 ? n : 1));
		}
		if (!e->out)
			return -errno;
	}
	if (p->paired) {
		e->pairs = bmap_new("fay_pairs", BPF_MAP_TYPE_HASH, 4,
				    (uint32_t)p->saved_size, (uint32_t)p->max_entries);
		if (!e->pairs)
			return -errno;
	}
	return 0;
}

/*
 * Refuse a query whose maps the kernel would allocate beyond max_prealloc
 * at creation (a profile() query's preallocated per-CPU hash of large
 * aggregates: 10,240+ keys x 16 KiB x CPUs), naming the largest map.
 */
static int check_map_memory(struct engine *e)
{
	const struct bmap *maps[] = { e->vals, e->zero, e->epoch, e->pairs, e->out, e->counters };
	uint64_t max = e->opts.max_prealloc ? e->opts.max_prealloc : ENGINE_MAX_PREALLOC;
	uint64_t total = 0, big = 0;
	const struct bmap *bigm = NULL;
	int ncpus = bpf_ncpus();

	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		bool pre;
		uint64_t b;

		if (!maps[i])
			continue;
		b = bmap_mem_bytes(maps[i], ncpus, &pre);
		if (!pre)
			continue;
		total += b;
		if (b > big) {
			big = b;
			bigm = maps[i];
		}
	}
	if (total <= max)
		return 0;
	return engine_fail(e, -E2BIG,
			   "the query's maps would take %llu MiB of kernel memory when created, over the limit of %llu MiB: %s holds %u keys of %u bytes%s on %d CPUs (%llu MiB); fewer or smaller aggregates per key (quantile and hist are the large ones), or a larger limit (fay query --max-map-memory)",
			   (unsigned long long)(total >> 20), (unsigned long long)(max >> 20),
			   bmap_name(bigm), bmap_max_entries(bigm), bmap_value_size(bigm),
			   bmap_is_percpu(bigm) ? " per CPU" : "", ncpus,
			   (unsigned long long)(big >> 20));
}

struct engine *engine_new(struct query *q, const struct plan *p,
			  const struct engine_opts *opts, char *err, size_t errlen)
{
	struct engine *e;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	e = calloc(1, sizeof(*e));
	if (!e) {
		if (err)
			snprintf(err, errlen, "out of memory\n");
		return fay_err_ptr(-ENOMEM);
	}
	e->q = q;
	e->p = p;
	if (opts)
		memcpy(&e->opts, opts, opts->sz < sizeof(e->opts) ? opts->sz :
		       sizeof(e->opts));
	e->opts.sz = sizeof(e->opts);
	/* The host field: the agent's --host, else as fay agent names its
	 * host by default. */
	if (e->opts.host && e->opts.host[0])
		snprintf(e->host, sizeof(e->host), "%s", e->opts.host);
	else if (gethostname(e->host, sizeof(e->host)))
		snprintf(e->host, sizeof(e->host), "localhost");
	e->host[sizeof(e->host) - 1] = '\0';

	if (!e->opts.emit_only && !engine_is_vm(e) && !bpf_have_privileges()) {
		rc = engine_fail(e, -EPERM, "running a query loads BPF programs: %s",
				 bpf_privilege_hint());
		goto err_out;
	}
	if (p->mode == PLAN_STREAM) {
		e->use_ringbuf = e->opts.buffer != ENGINE_BUF_PERF;
		if (engine_is_vm(e))
			e->use_ringbuf = true;	/* the VM's per-slot ring */
		else if (e->opts.buffer == ENGINE_BUF_AUTO && !e->opts.emit_only)
			e->use_ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF,
								   NULL) == 1;
	}
	rc = make_maps(e);
	if (rc) {
		engine_fail(e, rc, "cannot set up the maps: %s", errstr(rc));
		goto err_out;
	}
	rc = check_map_memory(e);
	if (rc)
		goto err_out;
	rc = eprog_setup(e, &e->progs[0], &p->entry, EP_ENTRY);
	e->nprogs = 1;
	e->progs[0].is_main = !p->paired;
	if (!rc && p->paired) {
		rc = eprog_setup(e, &e->progs[1], &p->exit, EP_EXIT);
		e->progs[1].is_main = true;
		e->nprogs = 2;
	}
	for (int i = 0; !rc && i < e->nprogs; i++) {
		struct eprog *ep = &e->progs[i];

		ep->assume_fentry_nargs = -1;
		if ((e->opts.emit_only && !needs_probe_for_codegen(ep)) || engine_is_vm(e))
			continue;
		rc = engine_resolve(e, ep);
		if (rc && e->opts.emit_only && (rc == -EOPNOTSUPP || rc == -EPERM) &&
		    (ep->kind == PROBE_KFUNC || ep->kind == PROBE_KFUNC_EXIT))
			rc = assume_fentry(e, ep);
	}
	rc = rc ? : engine_check_owners(e);
	rc = rc ? : engine_inl_decide(e);
	rc = rc ? : engine_inl_pairs(e);
	rc = rc ? : engine_codegen(e);
	if (rc)
		goto err_out;
	return e;

err_out:
	if (err)
		snprintf(err, errlen, "%s", e->err);
	engine_free(e);
	return fay_err_ptr(rc);
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	engine_detach(e);
	engine_inl_free(e);
	engine_vm_free(e);
	ring_buffer__free(e->rb);
	perf_buffer__free(e->pb);
	for (int i = 0; i < e->nprogs; i++) {
		probe_free(e->progs[i].probe);
		bprog_free(e->progs[i].prog);
		ir_free(e->progs[i].ir);
	}
	bmap_free(e->vals);
	bmap_free(e->zero);
	bmap_free(e->epoch);
	bmap_free(e->pairs);
	bmap_free(e->out);
	bmap_free(e->counters);
	free(e);
}

/* ---- dumps ------------------------------------------------------------------ */

static const char *map_type_name(enum bpf_map_type t)
{
	switch (t) {
	case BPF_MAP_TYPE_HASH: return "hash";
	case BPF_MAP_TYPE_PERCPU_HASH: return "percpu_hash";
	case BPF_MAP_TYPE_ARRAY: return "array";
	case BPF_MAP_TYPE_PERCPU_ARRAY: return "percpu_array";
	case BPF_MAP_TYPE_RINGBUF: return "ringbuf";
	case BPF_MAP_TYPE_PERF_EVENT_ARRAY: return "perf_event_array";
	default: return "?";
	}
}

static void dump_maps(const struct engine *e, FILE *f)
{
	const struct bmap *maps[] = { e->vals, e->zero, e->epoch, e->pairs, e->out,
				      e->counters };

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		const struct bmap *m = maps[i];

		if (!m)
			continue;
		if (bmap_type(m) == BPF_MAP_TYPE_RINGBUF)
			fprintf(f, "map %s: ringbuf, %u bytes\n", bmap_name(m),
				bmap_max_entries(m));
		else if (bmap_type(m) == BPF_MAP_TYPE_PERF_EVENT_ARRAY)
			fprintf(f, "map %s: perf_event_array, one per CPU\n", bmap_name(m));
		else
			fprintf(f, "map %s: %s, key %u bytes, value %u bytes, %u entries\n",
				bmap_name(m), map_type_name(bmap_type(m)), bmap_key_size(m),
				bmap_value_size(m), bmap_max_entries(m));
	}
}

static const char *ep_title(const struct eprog *ep)
{
	static const char *const kinds[] = {
		[PROBE_TRACEPOINT] = "tracepoint", [PROBE_SYSCALL] = "syscall entry",
		[PROBE_SYSCALL_EXIT] = "syscall exit", [PROBE_KFUNC] = "kernel function entry",
		[PROBE_KFUNC_EXIT] = "kernel function exit", [PROBE_UPROBE] = "uprobe",
		[PROBE_URETPROBE] = "uretprobe", [PROBE_USDT] = "usdt",
		[PROBE_PROFILE] = "profile",
	};

	if (ep->at->kind == PA_SPANS)
		return "spans";
	if (ep->probe)
		return probe_describe(ep->probe);
	if (ep->assume_fentry_nargs >= 0)
		return ep->kind == PROBE_KFUNC ? "fentry (assumed)" : "fexit (assumed)";
	return kinds[ep->kind];
}

/* The probes --emit could not resolve on this kernel, as comments. */
static void dump_assumed(const struct engine *e, FILE *f)
{
	for (int i = 0; i < e->nprogs; i++)
		if (e->progs[i].assume_fentry_nargs >= 0) {
			fprintf(f, "; this kernel cannot probe %s: the code is for fentry/fexit (%s)\n",
				e->progs[i].spec, e->progs[i].why_not);
			break;
		}
}

int engine_dump_ir(struct engine *e, FILE *f)
{
	dump_assumed(e, f);
	dump_maps(e, f);
	for (int i = 0; i < e->nprogs; i++) {
		fprintf(f, "\n; %s program: %s \"%s\"%s\n",
			e->progs[i].role == EP_ENTRY ? "entry" : "exit",
			ep_title(&e->progs[i]), e->progs[i].spec,
			e->progs[i].is_main ? " (main)" : "");
		ir_dump(e->progs[i].ir, f);
	}
	return ferror(f) ? -EIO : 0;
}

int engine_dump_bpf(struct engine *e, FILE *f)
{
	for (int i = 0; i < e->nprogs; i++) {
		int err = ir_lower(e->progs[i].ir);

		if (err)
			return engine_fail(e, err, "cannot lower the %s program: %s",
					   e->progs[i].role == EP_ENTRY ? "entry" : "exit",
					   ir_strerror(e->progs[i].ir));
	}
	dump_assumed(e, f);
	dump_maps(e, f);
	for (int i = 0; i < e->nprogs; i++) {
		size_t n;

		ir_insns(e->progs[i].ir, &n);
		fprintf(f, "\n; %s program: %s \"%s\": %zu instructions, %u bytes of stack\n",
			e->progs[i].role == EP_ENTRY ? "entry" : "exit",
			ep_title(&e->progs[i]), e->progs[i].spec, n,
			ir_stack_size(e->progs[i].ir));
		ir_dump_bpf(e->progs[i].ir, f);
	}
	return ferror(f) ? -EIO : 0;
}

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
			   ep->role == EP_ENTRY ? "entry" : "exit", ep_title(ep),
			   d->msg, d->log ? " (FAY_LOG_LEVEL=debug shows its log)" : "");
}

static int ring_sample(void *ctx, void *data, size_t size)
{
	struct engine *e = ctx;

	if (e->rec_fn && size >= (size_t)e->p->record_size)
		e->rec_fn(e->rec_ctx, data, (size_t)e->p->record_size);
	return 0;
}

static void perf_sample(void *ctx, int cpu, void *data, __u32 size)
{
	ring_sample(ctx, data, size);
}

static void perf_lost(void *ctx, int cpu, __u64 n)
{
	struct engine *e = ctx;

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
	if (e->out && e->use_ringbuf) {
		e->rb = ring_buffer__new(bmap_fd(e->out), ring_sample, e, NULL);
		if (!e->rb)
			return engine_fail(e, -errno, "cannot map the ring buffer: %s",
					   errstr(-errno));
	} else if (e->out) {
		e->pb = perf_buffer__new(bmap_fd(e->out), ENGINE_PERF_PAGES, perf_sample,
					 perf_lost, e, NULL);
		if (!e->pb)
			return engine_fail(e, -errno, "cannot open the perf buffers: %s",
					   errstr(-errno));
	}
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
	return 0;
}

void engine_detach(struct engine *e)
{
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
	return ep_title(&e->progs[i]);
}

uint32_t engine_prog_id(const struct engine *e, int i)
{
	if (i < 0 || i >= e->nprogs || !e->progs[i].prog)
		return 0;
	return bprog_id(e->progs[i].prog);
}

/* ---- counters --------------------------------------------------------------- */

const char *engine_counter_desc(enum engine_counter c)
{
	switch (c) {
	case EC_MAP_FULL:
		return "events dropped: the map of keys was full";
	case EC_PAIRS_FULL:
		return "calls not timed: the per-thread entry map was full";
	case EC_LOST:
		return "rows lost: the output buffer was full";
	case EC_READ_FAIL:
		return "string reads failed (bad, NULL or paged-out address; the value is \"\")";
	case EC_DEPTH:
		return "calls not timed: nested deeper than " INLINE_DEPTH_STR
		       " probed calls on their thread (inline)";
	default:
		return "?";
	}
}

static int counters_raw(struct engine *e, uint64_t out[ENGINE_NCOUNTERS])
{
	memset(out, 0, sizeof(uint64_t) * ENGINE_NCOUNTERS);
	if (!e->loaded)
		return 0;
	for (uint32_t c = 0; c < ENGINE_NCOUNTERS; c++) {
		int err = e->vm ? engine_vm_sum_u64(e, e->counters, &c, &out[c]) :
			  bmap_sum_u64(e->counters, &c, 0, &out[c]);

		if (err)
			return err;
	}
	/* A perf buffer's lost samples are the ones bpf_perf_event_output()
	 * failed on: the program counted them already (user_lost is the
	 * same number, seen from the reader's side). */
	return 0;
}

int engine_counters(struct engine *e, uint64_t out[ENGINE_NCOUNTERS])
{
	int err = counters_raw(e, out);

	for (int c = 0; !err && c < ENGINE_NCOUNTERS; c++)
		out[c] -= e->counters_base[c];
	return err;
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
	if (e->rb)
		return ring_buffer__epoll_fd(e->rb);
	if (e->pb)
		return perf_buffer__epoll_fd(e->pb);
	return -1;
}

int engine_consume(struct engine *e)
{
	int n = 0;

	if (e->vm)
		return engine_vm_consume(e);
	if (e->rb)
		n = ring_buffer__consume(e->rb);
	else if (e->pb)
		n = perf_buffer__consume(e->pb);
	return n;
}

/* ---- aggregates ------------------------------------------------------------- */

/* The reader's map calls: the kernel's maps, or the VM's (spans.c). */
static int vals_lookup(struct engine *e, const void *k, void *buf, size_t stride)
{
	return e->vm ? engine_vm_lookup(e, e->vals, k, buf, stride) : bmap_lookup(e->vals, k, buf);
}

static int vals_update(struct engine *e, const void *k, const void *buf, size_t stride)
{
	return e->vm ? engine_vm_update(e, e->vals, k, buf, stride) :
	       bmap_update(e->vals, k, buf, BPF_ANY);
}

static int vals_next_key(struct engine *e, const void *prev, void *next)
{
	return e->vm ? engine_vm_next_key(e, e->vals, prev, next) :
	       bmap_next_key(e->vals, prev, next);
}

static void vals_delete(struct engine *e, const void *k)
{
	if (e->vm)
		engine_vm_delete(e, e->vals, k);
	else
		bmap_delete(e->vals, k);
}

/* Merge ncpu per-CPU values (stride bytes apart) into dst. */
static void merge_cpus(const struct plan *p, unsigned char *dst,
		       const unsigned char *buf, int ncpu, size_t stride)
{
	for (int c = 0; c < ncpu; c++)
		for (int i = 0; i < p->naggrs; i++)
			if (p->aggrs[i].share < 0)	/* a shared sketch once */
				aggr_merge(&p->aggrs[i].desc, dst + p->aggrs[i].offset,
				   buf + (size_t)c * stride + p->aggrs[i].offset);
}

static int add_row(struct engine *e, struct engine_row **rows, size_t *n, size_t *cap,
		   const void *key, const unsigned char *buf, int ncpu, size_t stride)
{
	const struct plan *p = e->p;
	size_t vsize = bmap_value_size(e->vals), ksize = (size_t)p->key_size;
	struct engine_row *r;

	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct engine_row *nr = realloc(*rows, nc * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		*rows = nr;
		*cap = nc;
	}
	r = &(*rows)[*n];
	memset(r, 0, sizeof(*r));
	r->key = calloc(1, ksize ? ksize : 1);
	r->val = calloc(1, vsize);
	if (!r->key || !r->val) {
		free(r->key);
		free(r->val);
		return -ENOMEM;
	}
	if (ksize)
		memcpy(r->key, key, ksize);
	merge_cpus(p, r->val, buf, ncpu, stride);
	(*n)++;
	return 0;
}

/* Every key of vals (vk bytes each) into *keys; count or -errno. */
static long walk_keys(struct engine *e, size_t vk, unsigned char **keys)
{
	size_t n = 0, cap = 0;
	int err;

	*keys = NULL;
	for (;;) {
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 256;
			unsigned char *nk = realloc(*keys, nc * vk);

			if (!nk)
				return -ENOMEM;
			*keys = nk;
			cap = nc;
		}
		err = vals_next_key(e, n ? *keys + (n - 1) * vk : NULL, *keys + n * vk);
		if (err == -ENOENT)
			return (long)n;
		if (err)
			return err;
		n++;
		if (n > (size_t)e->p->max_entries * 4)
			return (long)n;	/* the map changed under the walk; enough */
	}
}

static bool has_str_key(const struct plan *p)
{
	for (int i = 0; i < p->nkeys; i++)
		if (p->keys[i].e->type == VT_STR)
			return true;
	return false;
}

/* Zero the bytes after the NUL of every string key component. */
static void clean_str_keys(const struct plan *p, unsigned char *key)
{
	for (int i = 0; i < p->nkeys; i++) {
		const struct plan_key *k = &p->keys[i];
		size_t n;

		if (k->e->type != VT_STR)
			continue;
		n = strnlen((const char *)key + k->offset, (size_t)k->size);
		memset(key + k->offset + n, 0, (size_t)k->size - n);
	}
}

/* Move the window epoch on: from now on the probes write new keys. */
static int next_epoch(struct engine *e)
{
	uint32_t k0 = 0;
	uint64_t next = e->cur_epoch + 1;
	int err = e->vm ? engine_vm_update(e, e->epoch, &k0, &next, 8) :
		  bmap_update(e->epoch, &k0, &next, BPF_ANY);

	if (err)
		return err;
	e->cur_epoch = next;
	if (e->vm)
		return 0;	/* no program runs while the reader holds the lock */
	/* let a probe that read the old epoch finish its update (one that
	 * does not lands in the next read) */
	usleep(1000);
	return 0;
}

/* The rows of t (user keys merged over epochs) into res. */
static int rows_of_table(const struct plan *p, const struct ptable *t,
			 struct engine_row **rows, size_t *n)
{
	size_t cnt = ptable_count(t);

	*n = 0;
	*rows = calloc(cnt ? cnt : 1, sizeof(**rows));
	if (!*rows)
		return -ENOMEM;
	for (size_t i = 0; i < cnt; i++) {
		const void *k, *v;
		struct engine_row *r = &(*rows)[i];

		ptable_row(t, i, &k, &v);
		r->key = malloc((size_t)p->key_size + 1);
		r->val = malloc((size_t)p->value_size);
		*n = i + 1;
		if (!r->key || !r->val)
			return -ENOMEM;
		memcpy(r->key, k, (size_t)p->key_size);
		memcpy(r->val, v, (size_t)p->value_size);
	}
	return 0;
}

static int read_rows(struct engine *e, bool reset, bool raw_rows,
		     struct engine_result *res)
{
	const struct plan *p = e->p;
	int ncpu = e->vm ? engine_vm_ncpus(e) : bpf_ncpus(), err = 0;
	size_t stride, n = 0, cap = 0, nkeys = 0;
	size_t ksize = (size_t)p->key_size, vk = ksize + (e->epochs ? 8 : 0);
	unsigned char *buf = NULL, *keys = NULL, *merged = NULL, *ukey = NULL;
	struct engine_row *rows = NULL;
	struct ptable *t = NULL;
	uint64_t raw[ENGINE_NCOUNTERS];
	/* rows are merged by user key: over window epochs, and over string
	 * keys that differ only after their NUL (a tracepoint's char[] field
	 * holds whatever the kernel left there after the string) */
	bool by_key = e->epochs || has_str_key(p);

	memset(res, 0, sizeof(*res));
	if (!e->vals || !e->loaded)
		return engine_fail(e, -EINVAL, "internal: no aggregates to read");
	if (ncpu <= 0)
		ncpu = 1;
	stride = (bmap_value_size(e->vals) + 7) & ~(size_t)7;
	buf = calloc((size_t)ncpu, stride);
	if (!buf)
		return -ENOMEM;
	if (!vk) {
		uint32_t k0 = 0;

		err = vals_lookup(e, &k0, buf, stride);
		err = err ? : add_row(e, &rows, &n, &cap, NULL, buf, ncpu, stride);
		if (!err && reset) {
			memset(buf, 0, (size_t)ncpu * stride);
			err = vals_update(e, &k0, buf, stride);
		}
		goto done;
	}
	if (by_key) {
		t = ptable_new(p);
		merged = calloc(1, stride);
		ukey = calloc(1, ksize + 1);
		if (!t || !merged || !ukey) {
			err = -ENOMEM;
			goto done;
		}
	}
	if (e->epochs && reset)
		err = next_epoch(e);
	/* every key first (deleting while walking restarts the walk) */
	if (!err) {
		long got = walk_keys(e, vk, &keys);

		if (got < 0)
			err = (int)got;
		else
			nkeys = (size_t)got;
	}
	for (size_t i = 0; !err && i < nkeys; i++) {
		const unsigned char *k = keys + i * vk;
		uint64_t ep;
		int lerr;

		if (e->epochs && reset) {
			memcpy(&ep, k + ksize, 8);
			if (ep == e->cur_epoch)
				continue;	/* the new window's */
		}
		lerr = vals_lookup(e, k, buf, stride);
		if (lerr == -ENOENT)
			continue;
		if (lerr) {
			err = lerr;
			break;
		}
		if (by_key) {
			memset(merged, 0, stride);
			merge_cpus(p, merged, buf, ncpu, stride);
			memcpy(ukey, k, ksize);
			clean_str_keys(p, ukey);
			err = ptable_merge(t, ukey, merged);
		} else {
			err = add_row(e, &rows, &n, &cap, k, buf, ncpu, stride);
		}
		if (!err && reset)
			vals_delete(e, k);
	}
	if (!err && by_key)
		err = rows_of_table(p, t, &rows, &n);
done:
	if (!err)
		err = engine_counters(e, res->counters);
	if (!err && reset && !counters_raw(e, raw))
		memcpy(e->counters_base, raw, sizeof(raw));
	res->rows = rows;
	res->nrows = n;
	free(buf);
	free(keys);
	free(merged);
	free(ukey);
	ptable_free(t);
	if (err) {
		engine_result_clear(res);
		return engine_fail(e, err, "cannot read the aggregates: %s", errstr(err));
	}
	if (!raw_rows)
		err = engine_result_order(p, res);
	return err;
}

int engine_read_rows(struct engine *e, bool reset, bool raw_rows,
		     struct engine_result *res)
{
	int err;

	if (!e->vm)
		return read_rows(e, reset, raw_rows, res);
	engine_vm_lock(e);
	err = read_rows(e, reset, raw_rows, res);
	engine_vm_unlock(e);
	return err;
}

int engine_read(struct engine *e, bool reset, struct engine_result *res)
{
	return engine_read_rows(e, reset, false, res);
}
