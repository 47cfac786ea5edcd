// SPDX-License-Identifier: MIT
/*
 * Reading the engine: its counters, and the aggregates (per-CPU partials
 * merged with aggr_merge(), over window epochs and string keys, ordered,
 * limited; reset at a window's end).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/inline_wire.h"
#include "engine/engine_int.h"
#include "query/partial.h"

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
	case EC_UNWOUND:	/* an older agent's count: f.unwound now */
		return "calls not timed: left without returning (longjmp, an exception "
		       "unwinding through them; inline, an older fay)";
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
	size_t ksize = (size_t)p->bpf_key_size, vk = ksize + (e->epochs ? 8 : 0);
	unsigned char *buf = NULL, *keys = NULL, *merged = NULL, *ukey = NULL;
	struct engine_row *rows = NULL;
	struct ptable *t = NULL;
	uint64_t raw[ENGINE_NCOUNTERS];
	/* rows are merged by user key: over window epochs, and over string
	 * keys that differ only after their NUL (a tracepoint's char[] field
	 * holds whatever the kernel left there after the string) */
	bool by_key = e->epochs || has_str_key(p);	/* stacks are strings */

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
		ukey = calloc(1, (size_t)p->key_size + 1);
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
			if (p->stack_depth)	/* stack ids to frames' names */
				engine_stacks_key(e, ukey, k);
			else
				memcpy(ukey, k, ksize);
			plan_names_key(p, ukey);	/* ids to names first */
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
		err = engine_result_categorize(p, res, &e->cat_prev);
	if (!err && !raw_rows)
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
