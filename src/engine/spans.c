// SPDX-License-Identifier: MIT
/*
 * spans(...) queries in the engine: no probe and no kernel.  The plan's
 * programs (the same code generation as every source, reading the span
 * context of query/spanctx.h at r1) are built for fay's in-process VM
 * with one slot per map (engine/inline.h); whoever drains spans (fay
 * agent) calls engine_span_feed() for each one, and the reader (run_read.c)
 * reads the VM maps through the functions below exactly as it reads the
 * kernel's per-CPU maps, one slot standing for one CPU.
 *
 * One lock per engine: a feed runs the program under it, and every read,
 * reset and ring drain of the reader takes it, so the reader never sees a
 * half-updated value and a window's reset loses no span.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/err.h"
#include "common/inline_wire.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "engine/inline.h"

#define VM_SLOTS 1
/* Threads of a traced process that can run inline probes at once (a
 * slot each in every per-slot map; more threads are not traced): the
 * runtime's RT_MAX_SLOTS.  The maps are sparse memfds and the reader
 * merges only the slots the runtime noted (vm_map_slots_used()), so
 * unused slots cost neither memory nor reading time. */
#define INLINE_SLOTS 1024

struct engine_vm {
	struct engine_inline in;
	pthread_mutex_t lock;
	unsigned int nslots;	/* slots of the maps */
	unsigned int rslots;	/* the reader's "CPUs": engine_vm_ncpus()'s snapshot */
	int evfd;		/* readable when streamed rows wait (inline: a timer) */
	bool pending;		/* rows written since the last kick */
	unsigned char *recs;	/* engine_consume(): copies, delivered unlocked */
	size_t nrecs_bytes, recs_cap;
};

bool engine_is_vm(const struct engine *e)
{
	return e->p->entry.kind == PA_SPANS || engine_inl_active(e);
}

const struct engine_inline *engine_vm_inline(const struct engine *e)
{
	return &e->vm->in;
}

/* function(...) inline: the maps in memfds the process maps, a slot per
 * thread; streamed rows are polled (the programs run in another process:
 * nothing here is told when they write). */
static int inl_load(struct engine *e, struct engine_vm *v)
{
	struct itimerspec every = { { 0, 20000000 }, { 0, 20000000 } };
	char why[1024];
	int err;

	/* a command fay started: its descendants' windows above the
	 * command's slots (engine_inl_kid()) */
	v->nslots = e->opts.hold_execs && e->opts.probe_mode == ENGINE_PROBE_INLINE ?
		    INLINE_MAX_SLOTS : INLINE_SLOTS;
	err = engine_inline_new_shared(e, v->nslots, INLINE_CTX_SIZE, &v->in, why, sizeof(why));
	if (err)
		return engine_fail(e, err, "inline probes: %s", why);
	if (e->out) {
		v->evfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (v->evfd < 0 || timerfd_settime(v->evfd, 0, &every, NULL))
			return engine_fail(e, -errno, "timerfd: %s", errstr(-errno));
	}
	return 0;
}

int engine_vm_load(struct engine *e)
{
	struct engine_vm *v = calloc(1, sizeof(*v));
	char why[1024];
	int err;

	if (!v)
		return engine_fail(e, -ENOMEM, "out of memory");
	v->evfd = -1;
	v->nslots = v->rslots = VM_SLOTS;
	pthread_mutex_init(&v->lock, NULL);
	e->vm = v;
	if (engine_inl_active(e))
		return inl_load(e, v);
	err = engine_inline_new_ctx(e, VM_SLOTS, false, (size_t)e->p->ctx_size, &v->in,
				    why, sizeof(why));
	if (err)
		return engine_fail(e, err, "the spans program: %s", why);
	/* the interpreter runs it where the JIT cannot (not x86-64) */
	(void)vm_prog_jit(v->in.entry);
	if (e->out) {
		v->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (v->evfd < 0)
			return engine_fail(e, -errno, "eventfd: %s", errstr(-errno));
	}
	return 0;
}

void engine_vm_free(struct engine *e)
{
	struct engine_vm *v = e->vm;

	if (!v)
		return;
	engine_inline_free(&v->in);
	if (v->evfd >= 0)
		close(v->evfd);
	pthread_mutex_destroy(&v->lock);
	free(v->recs);
	free(v);
	e->vm = NULL;
}

int engine_span_feed(struct engine *e, void *ctx)
{
	struct engine_vm *v = e->vm;
	struct vm_env env = { .slot = 0 };

	if (!v || !e->attached)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	vm_run(v->in.entry, ctx, &env);
	if (e->out)
		v->pending = true;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

void engine_span_kick(struct engine *e)
{
	struct engine_vm *v = e->vm;
	uint64_t one = 1;
	bool kick;

	if (!v || v->evfd < 0)
		return;
	pthread_mutex_lock(&v->lock);
	kick = v->pending;
	v->pending = false;
	pthread_mutex_unlock(&v->lock);
	if (kick && write(v->evfd, &one, sizeof(one)) < 0) {
		/* the counter is full: the reader has plenty to read */
	}
}

void engine_vm_lock(struct engine *e)
{
	pthread_mutex_lock(&e->vm->lock);
}

void engine_vm_unlock(struct engine *e)
{
	pthread_mutex_unlock(&e->vm->lock);
}

static struct vm_map *vmap(const struct engine *e, const struct bmap *b)
{
	return engine_inline_map(&e->vm->in, b);
}

/* The slots of m the reader reads: the last engine_vm_ncpus() snapshot
 * (its buffers are that many values long). */
static unsigned int rslots(const struct engine *e, const struct vm_map *m)
{
	return e->vm->rslots < vm_map_nslots(m) ? e->vm->rslots : vm_map_nslots(m);
}

int engine_vm_lookup(const struct engine *e, const struct bmap *b, const void *key,
		     void *buf, size_t stride)
{
	struct vm_map *m = vmap(e, b);
	size_t vsize = bmap_value_size(b);

	if (!m)
		return -ENOENT;
	for (unsigned s = 0; s < rslots(e, m); s++) {
		const void *val = vm_map_lookup(m, key, s);

		if (!val)
			return -ENOENT;
		memcpy((unsigned char *)buf + s * stride, val, vsize);
	}
	return 0;
}

int engine_vm_next_key(const struct engine *e, const struct bmap *b, const void *prev,
		       void *next)
{
	struct vm_map *m = vmap(e, b);

	return m ? vm_map_next_key(m, prev, next) : -ENOENT;
}

int engine_vm_update(const struct engine *e, const struct bmap *b, const void *key,
		     const void *buf, size_t stride)
{
	struct vm_map *m = vmap(e, b);
	bool per_slot = bmap_type(b) == BPF_MAP_TYPE_PERCPU_ARRAY ||
			bmap_type(b) == BPF_MAP_TYPE_PERCPU_HASH;
	int err = 0;

	if (!m)
		return -ENOENT;
	for (unsigned s = 0; !err && s < (per_slot ? rslots(e, m) : 1); s++)
		err = vm_map_update(m, key, (const unsigned char *)buf + s * stride, BPF_ANY, s);
	return err;
}

int engine_vm_delete(const struct engine *e, const struct bmap *b, const void *key)
{
	struct vm_map *m = vmap(e, b);

	return m ? vm_map_delete(m, key) : -ENOENT;
}

int engine_vm_sum_u64(const struct engine *e, const struct bmap *b, const void *key,
		      uint64_t *out)
{
	struct vm_map *m = vmap(e, b);

	*out = 0;
	if (!m)
		return 0;	/* the program never counts: no map was made */
	for (unsigned s = 0; s < (engine_inl_active(e) ? vm_map_slots_used(m) :
				  vm_map_nslots(m)); s++) {
		const uint64_t *val = vm_map_lookup(m, key, s);

		if (val)
			*out += *val;
	}
	return 0;
}

int engine_vm_ncpus(const struct engine *e)
{
	struct engine_vm *v = e->vm;
	unsigned int used = 1;

	if (!engine_inl_active(e))
		return (int)v->nslots;
	/* inline: the slots threads have taken so far (the maps are noted
	 * together), at least one */
	for (int i = 0; i < v->in.nmaps; i++)
		if (vm_map_slots_used(v->in.maps[i]) > used)
			used = vm_map_slots_used(v->in.maps[i]);
	v->rslots = used;
	return (int)used;
}

int engine_vm_stream_fd(const struct engine *e)
{
	return e->vm ? e->vm->evfd : -1;
}

static void copy_rec(const void *data, uint32_t size, void *arg)
{
	struct engine_vm *v = arg;
	size_t need = v->nrecs_bytes + sizeof(uint32_t) + size;

	if (need > v->recs_cap) {
		size_t cap = v->recs_cap ? v->recs_cap : 65536;
		unsigned char *n;

		while (cap < need)
			cap *= 2;
		n = realloc(v->recs, cap);
		if (!n)
			return;		/* a row lost to memory: never a bad one */
		v->recs = n;
		v->recs_cap = cap;
	}
	memcpy(v->recs + v->nrecs_bytes, &size, sizeof(size));
	memcpy(v->recs + v->nrecs_bytes + sizeof(size), data, size);
	v->nrecs_bytes = need;
}

int engine_vm_consume(struct engine *e)
{
	struct engine_vm *v = e->vm;
	struct vm_map *m;
	uint64_t cnt;
	int n = 0;

	if (!v || !e->out || !(m = vmap(e, e->out)))
		return 0;
	if (read(v->evfd, &cnt, sizeof(cnt)) < 0) {
		/* nothing was signalled; drain what is there all the same */
	}
	pthread_mutex_lock(&v->lock);
	v->nrecs_bytes = 0;
	for (unsigned s = 0; s < (engine_inl_active(e) ? vm_map_slots_used(m) :
				  vm_map_nslots(m)); s++)
		vm_ring_drain(m, s, copy_rec, v);
	pthread_mutex_unlock(&v->lock);
	for (size_t off = 0; off < v->nrecs_bytes; n++) {
		uint32_t size;

		memcpy(&size, v->recs + off, sizeof(size));
		if ((e->p->names || e->p->cgroups) && size >= (uint32_t)e->p->record_size)
			plan_names_record(e->p, v->recs + off + sizeof(size));
		if (e->rec_fn)
			e->rec_fn(e->rec_ctx, v->recs + off + sizeof(size), size);
		off += sizeof(size) + size;
	}
	return n;
}
