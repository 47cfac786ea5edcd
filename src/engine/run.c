// SPDX-License-Identifier: MIT
/*
 * The engine's set-up (maps, probe points, code generation), its dumps
 * (--emit=ir|bpf) and tear-down (every attachment, program and map
 * closed, whatever path leads there).  Loading, attaching and streaming
 * are in run_load.c, reading the aggregates in run_read.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf/kbtf.h"
#include "common/err.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "probe/elfsym.h"

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

/* A wildcard's functions name s.name's ids (the cookie of each
 * attachment is its index): into the plan's table, once.  A tracepoint
 * wildcard's table came with the plan (tracefs, when the query was
 * checked): the probe's events must be the same, in the same order. */
static int engine_site_names(struct engine *e, const struct eprog *ep)
{
	size_t n = probe_nsites(ep->probe);
	const struct plan_names *t = e->p->names;
	const char **v;
	int err;

	if (!n || !t || t->src != PN_COOKIE)
		return 0;
	if (t->n) {
		for (size_t i = 0; i < n; i++)
			if ((size_t)t->n != n || strcmp(t->name[i], probe_site_name(ep->probe, i)))
				return engine_fail(e, -EAGAIN, "%s: the kernel's events "
						   "changed between planning and attaching (%d "
						   "planned, %zu now): run the query again",
						   ep->spec, t->n, n);
		return 0;
	}
	if (!(v = calloc(n, sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = probe_site_name(ep->probe, i);
	err = query_plan_set_names(e->q, v, (int)n);
	free(v);
	return err ? engine_fail(e, err, "cannot keep the names of %s", ep->spec) : 0;
}

int engine_resolve(struct engine *e, struct eprog *ep)
{
	char why[512];

	if (ep->probe)
		return 0;
	ep->probe = probe_new(ep->kind, ep->spec, &ep->popts, why, sizeof(why));
	if (!ep->probe)
		return engine_fail(e, -errno, "%s", why);
	return engine_site_names(e, ep);
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
	struct kbtf *btf = kbtf_open();
	int n = btf ? kbtf_func(btf, ep->spec, NULL) : -ENOENT;

	snprintf(ep->why_not, sizeof(ep->why_not), "%.*s", (int)strcspn(e->err, "\n"),
		 e->err);
	if (n != -ENOENT)
		ep->assume_fentry_nargs = n < 0 ? 0 : n;
	kbtf_free(btf);
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
					   (uint32_t)p->bpf_key_size + (e->epochs ? 8 : 0), vsize, n);
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
		if (engine_stacks_map(e))
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
		/* the exit a uretprobe (inline probes replace the map:
		 * engine_inl_pairs()) */
		e->frame_pairs = p->exit.kind == PA_URETPROBE;
		e->pairs = bmap_new("fay_pairs",
				    e->frame_pairs ? BPF_MAP_TYPE_LRU_HASH : BPF_MAP_TYPE_HASH,
				    e->frame_pairs ? 16 : 4,
				    (uint32_t)p->saved_size, (uint32_t)p->max_entries);
		if (!e->pairs)
			return -errno;
	}
	return 0;
}

/*
 * An exit probe never breaks unwinding: a kernel uretprobe replaces the
 * return address with the kernel's trampoline, which has no call frame
 * information, so a C++ exception unwinding through the call aborts the
 * program ("terminate called after throwing ...").  A query whose exit
 * stayed a uretprobe (not inline) on a binary that throws or catches
 * C++ exceptions (elf_cxx_exceptions()) is refused with the reason.
 */
static int check_exit_unwind(struct engine *e)
{
	for (int i = 0; i < e->nprogs; i++) {
		const struct eprog *ep = &e->progs[i];
		const char *bin;

		if (e->inl || e->opts.emit_only || ep->kind != PROBE_URETPROBE || !ep->probe)
			continue;
		bin = probe_binary(ep->probe);
		if (bin && elf_cxx_exceptions(bin) == 1)
			return engine_fail(e, -EOPNOTSUPP, "%s: %s throws or catches C++ exceptions, "
					   "and one unwinding through a call with a kernel "
					   "uretprobe aborts the program (the kernel's return "
					   "trampoline has no unwind information): time it with "
					   "inline probes (a process named with -p PID or "
					   "started with fay run, --probe-mode=inline), or count "
					   "its entries only%s%s", ep->spec, bin,
					   e->note[0] ? "; " : "", e->note);
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
			e->use_ringbuf = bpf_have_ringbuf();
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
	rc = rc ? : check_exit_unwind(e);
	rc = rc ? : engine_scope(e);
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
	brbuf_free(e->out_rd);
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
	bmap_free(e->stacks);
	bmap_free(e->unwind);
	bmap_free(e->stk);
	bmap_free(e->stkscr);
	bmap_free(e->follow);
	engine_spancur_free(e);
	stacksym_free(e->ssym);
	engine_cats_free(e->cat_prev);
	free(e);
}

/* ---- dumps ------------------------------------------------------------------ */

static const char *map_type_name(enum bpf_map_type t)
{
	switch (t) {
	case BPF_MAP_TYPE_HASH: return "hash";
	case BPF_MAP_TYPE_LRU_HASH: return "lru_hash";
	case BPF_MAP_TYPE_PERCPU_HASH: return "percpu_hash";
	case BPF_MAP_TYPE_ARRAY: return "array";
	case BPF_MAP_TYPE_PERCPU_ARRAY: return "percpu_array";
	case BPF_MAP_TYPE_RINGBUF: return "ringbuf";
	case BPF_MAP_TYPE_PERF_EVENT_ARRAY: return "perf_event_array";
	case BPF_MAP_TYPE_STACK_TRACE: return "stack_trace";
	default: return "?";
	}
}

static void dump_maps(const struct engine *e, FILE *f)
{
	const struct bmap *maps[] = { e->vals, e->zero, e->epoch, e->pairs, e->out,
				      e->counters, e->stacks, e->stk, e->stkscr,
				      e->spancur };

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

/* What ep probes, for titles and messages: engine_int.h. */
const char *engine_ep_title(const struct eprog *ep)
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
			engine_ep_title(&e->progs[i]), e->progs[i].spec,
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
			engine_ep_title(&e->progs[i]), e->progs[i].spec, n,
			ir_stack_size(e->progs[i].ir));
		ir_dump_bpf(e->progs[i].ir, f);
	}
	return ferror(f) ? -EIO : 0;
}
