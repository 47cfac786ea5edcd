// SPDX-License-Identifier: MIT
/*
 * VM maps: arrays, hash tables and rings in one mapping, with per-slot
 * copies of the values of the per-CPU types (a slot per thread).
 *
 * Layout of the mapping: a header, then
 *   ARRAY          values[max_entries]
 *   PERCPU_ARRAY   values[nslots][max_entries]
 *   HASH           entries[cap] (state, value index, key), free[max_entries],
 *                  values[max_entries]
 *   PERCPU_HASH    the same with values[nslots][max_entries]
 *   RINGBUF        per slot: struct ring (head, tail), data[max_entries]
 *   STACK_TRACE    entries[max_entries] (tag, addresses): the tag is 0
 *                  (free), 1 (being written) or the addresses' hash with
 *                  the top bit set (published)
 * Values are padded to 8 bytes.  A hash table has cap = the power of two
 * >= 2 * max_entries entries and linear probing; deleted entries become
 * tombstones that an insert reuses, so an entry never moves.  Values are
 * handed out in order (then from the stack of freed ones), so a map with
 * few keys touches few pages of its mapping, and a pointer a program got
 * from a lookup always stays inside the map.  Inserts and deletes
 * take a spin lock; lookups take none (an entry's key is written before
 * its state is published with a release store).
 *
 * A window (vm_map_new_window()) is one process's view of a mapping
 * several processes write: its slot s is the mapping's slot base + s, so
 * processes that each number their threads' slots from 0 write apart and
 * the reader merges them as it merges one process's slots.  The lock is
 * then shared by processes, one of which may die holding it: it is
 * given up after about a second of spinning (the insert fails: the
 * program's update is lost, nothing waits for ever).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/vm_int.h"

enum { E_EMPTY, E_FULL, E_DEAD };

#define STACK_READY	(1ull << 63)	/* a stack entry's tag: published */

struct ring {
	uint64_t head;			/* bytes produced */
	char pad1[56];
	uint64_t tail;			/* bytes consumed */
	char pad2[56];
};

struct vm_map {
	struct vm_map_def def;
	unsigned int nslots;		/* the mapping's slots */
	unsigned int base;		/* a window's first slot (else 0) */
	void *mem;
	size_t size;
	int fd;				/* the memfd behind mem, or -1 */
	uint32_t *lock;
	uint32_t *count;
	uint32_t *next_val;		/* values handed out so far */
	uint32_t *nfree, *free_vals;	/* stack of freed value indices */
	uint32_t *used;			/* slots noted (vm_map_note_slot), 0: not kept */
	size_t vsz;			/* value stride */
	size_t esz;			/* hash entry stride */
	uint32_t cap;			/* hash capacity / entries of an array */
	char *entries, *values;
	size_t slot_stride;		/* bytes between slots' values */
};

static size_t align8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

static bool is_hash(uint32_t t)
{
	return t == BPF_MAP_TYPE_HASH || t == BPF_MAP_TYPE_PERCPU_HASH;
}

static bool is_percpu(uint32_t t)
{
	return t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_PERCPU_ARRAY;
}

struct vm_map *vm_map_new(const struct vm_map_def *def, unsigned int nslots)
{
	return vm_map_new_fd(def, nslots, -2);
}

struct vm_map *vm_map_new_fd(const struct vm_map_def *def, unsigned int nslots, int fd)
{
	return vm_map_new_window(def, nslots, fd, 0);
}

/* fd -2: anonymous shared memory; -1: a new memfd; >= 0: that file. */
struct vm_map *vm_map_new_window(const struct vm_map_def *def, unsigned int nslots, int fd,
				 unsigned int base)
{
	struct vm_map *m;
	size_t hdr = 64, sz;
	struct stat st;

	if (!def || nslots < 1 || nslots > 4096 || base >= nslots)
		goto inval;
	switch (def->type) {
	case BPF_MAP_TYPE_ARRAY: case BPF_MAP_TYPE_PERCPU_ARRAY:
		if (def->key_size != 4)
			goto inval;
		/* fall through */
	case BPF_MAP_TYPE_HASH: case BPF_MAP_TYPE_PERCPU_HASH:
		if (!def->key_size || def->key_size > 512 || !def->value_size ||
		    def->value_size > (1u << 20) || !def->max_entries ||
		    def->max_entries > (1u << 20))
			goto inval;
		break;
	case BPF_MAP_TYPE_STACK_TRACE:
		if (def->key_size != 4 || !def->value_size || def->value_size % 8 ||
		    def->value_size > 127 * 8 || !def->max_entries ||
		    def->max_entries > (1u << 20))
			goto inval;
		break;
	case BPF_MAP_TYPE_RINGBUF:
		if (def->max_entries < 4096 || (def->max_entries & (def->max_entries - 1)) ||
		    def->max_entries > (1u << 28))
			goto inval;
		break;
	default:
		goto inval;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->def = *def;
	m->nslots = nslots;
	m->base = base;
	m->vsz = align8(def->value_size) + (def->type == BPF_MAP_TYPE_STACK_TRACE ? 8 : 0);
	if (def->type == BPF_MAP_TYPE_RINGBUF) {
		m->slot_stride = sizeof(struct ring) + def->max_entries;
		sz = hdr + (size_t)nslots * m->slot_stride;
	} else if (is_hash(def->type)) {
		m->cap = 1;
		while (m->cap < 2 * def->max_entries)
			m->cap <<= 1;
		m->esz = 8 + align8(def->key_size);
		m->slot_stride = (size_t)def->max_entries * m->vsz;
		sz = hdr + (size_t)m->cap * m->esz + align8(4ull * def->max_entries) +
		     (is_percpu(def->type) ? nslots : 1) * m->slot_stride;
	} else {
		m->cap = def->max_entries;
		m->slot_stride = (size_t)m->cap * m->vsz;
		sz = hdr + (is_percpu(def->type) ? nslots : 1) * m->slot_stride;
	}
	m->size = sz;
	m->fd = -1;
	if (fd == -1) {
		/* sparse: pages are allocated as they are touched */
		m->fd = memfd_create("fay-vm-map", MFD_CLOEXEC);
		if (m->fd < 0 || ftruncate(m->fd, (off_t)sz))
			goto fail;
	} else if (fd >= 0) {
		if (fstat(fd, &st) || (uint64_t)st.st_size != sz) {
			free(m);
			errno = EINVAL;
			return NULL;
		}
		m->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (m->fd < 0)
			goto fail;
	}
	m->mem = mmap(NULL, sz, PROT_READ | PROT_WRITE,
		      MAP_SHARED | (m->fd < 0 ? MAP_ANONYMOUS : 0), m->fd, 0);
	if (m->mem == MAP_FAILED)
		goto fail;
	m->lock = (uint32_t *)m->mem;
	m->count = (uint32_t *)m->mem + 1;
	m->next_val = (uint32_t *)m->mem + 2;
	m->nfree = (uint32_t *)m->mem + 3;
	m->used = (uint32_t *)m->mem + 4;
	m->entries = (char *)m->mem + hdr;
	m->values = m->entries;
	if (is_hash(def->type)) {
		m->free_vals = (uint32_t *)(m->entries + (size_t)m->cap * m->esz);
		m->values = (char *)m->free_vals + align8(4ull * def->max_entries);
	}
	return m;
fail:
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	errno = ENOMEM;
	return NULL;
inval:
	errno = EINVAL;
	return NULL;
}

int vm_map_fd(const struct vm_map *m)
{
	return m->fd;
}

void vm_map_free(struct vm_map *m)
{
	if (!m)
		return;
	munmap(m->mem, m->size);
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

const struct vm_map_def *vm_map_def(const struct vm_map *m)
{
	return &m->def;
}

unsigned int vm_map_nslots(const struct vm_map *m)
{
	return m->nslots - m->base;
}

void *vm_map_mem(const struct vm_map *m, size_t *size)
{
	if (size)
		*size = m->size;
	return m->mem;
}

/* The map's lock, or false after about a second of spinning (2^25
 * pauses): its holder is a process that died holding it (a window). */
static bool lock(struct vm_map *m)
{
	unsigned long spins = 0;

	while (__atomic_exchange_n(m->lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(m->lock, __ATOMIC_RELAXED))
			if (++spins >> 25)
				return false;
			else
				__builtin_ia32_pause();
	return true;
}

static void unlock(struct vm_map *m)
{
	__atomic_store_n(m->lock, 0, __ATOMIC_RELEASE);
}

static uint32_t hash(const void *key, uint32_t n)
{
	const unsigned char *p = key;
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ h >> 32);
}

static char *entry(const struct vm_map *m, uint32_t i)
{
	return m->entries + (size_t)i * m->esz;
}

/* Value v (an array index, or a hash entry's value index) of slot. */
static char *value(const struct vm_map *m, uint32_t i, unsigned int slot)
{
	size_t s = is_percpu(m->def.type) ? slot : 0;

	return m->values + s * m->slot_stride + (size_t)i * m->vsz;
}

bool vm_map_array_layout(const struct vm_map *m, struct vm_array_layout *l)
{
	if (m->def.type != BPF_MAP_TYPE_ARRAY && m->def.type != BPF_MAP_TYPE_PERCPU_ARRAY)
		return false;
	bool pc = is_percpu(m->def.type);

	*l = (struct vm_array_layout){ m->values + (pc ? m->base * m->slot_stride : 0), m->vsz,
				       m->slot_stride, m->cap, m->nslots - m->base, pc };
	return true;
}

static uint32_t vidx(const struct vm_map *m, uint32_t i)
{
	return ((uint32_t *)entry(m, i))[1];
}

/* Index of key's live entry, or -1. */
static int64_t find(const struct vm_map *m, const void *key)
{
	uint32_t mask = m->cap - 1, i = hash(key, m->def.key_size) & mask;

	for (uint32_t n = 0; n < m->cap; n++, i = (i + 1) & mask) {
		char *e = entry(m, i);
		uint32_t st = __atomic_load_n((uint32_t *)e, __ATOMIC_ACQUIRE);

		if (st == E_EMPTY)
			return -1;
		if (st == E_FULL && !memcmp(e + 8, key, m->def.key_size))
			return i;
	}
	return -1;
}

void *vm_map_lookup(const struct vm_map *m, const void *key, unsigned int slot)
{
	uint32_t k;
	int64_t i;

	if (slot >= m->nslots - m->base || m->def.type == BPF_MAP_TYPE_RINGBUF)
		return NULL;
	if (m->def.type == BPF_MAP_TYPE_STACK_TRACE) {	/* one table, every slot's */
		memcpy(&k, key, 4);
		if (k >= m->cap ||
		    !(__atomic_load_n((uint64_t *)value(m, k, 0), __ATOMIC_ACQUIRE) & STACK_READY))
			return NULL;
		return value(m, k, 0) + 8;
	}
	slot += m->base;
	if (!is_hash(m->def.type)) {
		memcpy(&k, key, 4);
		return k < m->cap ? value(m, k, slot) : NULL;
	}
	i = find(m, key);
	return i < 0 ? NULL : value(m, vidx(m, (uint32_t)i), slot);
}

int vm_map_next_key(const struct vm_map *m, const void *prev, void *next)
{
	uint32_t k;

	if (m->def.type == BPF_MAP_TYPE_RINGBUF)
		return -EINVAL;
	if (!is_hash(m->def.type)) {
		if (prev)
			memcpy(&k, prev, 4);
		k = prev ? k + 1 : 0;
		if (k >= m->cap)
			return -ENOENT;
		memcpy(next, &k, 4);
		return 0;
	}
	/* Hash: in entry order, restarting after prev's entry. */
	int64_t from = 0;

	if (prev) {
		int64_t i = find(m, prev);

		if (i >= 0)
			from = i + 1;
	}
	for (uint32_t i = (uint32_t)from; i < m->cap; i++) {
		char *e = entry(m, i);

		if (__atomic_load_n((uint32_t *)e, __ATOMIC_ACQUIRE) == E_FULL) {
			memcpy(next, e + 8, m->def.key_size);
			return 0;
		}
	}
	return -ENOENT;
}

void vm_map_note_slot(struct vm_map *m, unsigned int slot)
{
	uint32_t u = __atomic_load_n(m->used, __ATOMIC_RELAXED);

	slot += m->base;
	while (u < slot + 1 && !__atomic_compare_exchange_n(m->used, &u, slot + 1, false,
							    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

unsigned int vm_map_slots_used(const struct vm_map *m)
{
	uint32_t u = __atomic_load_n(m->used, __ATOMIC_ACQUIRE);

	return u < m->nslots ? u : m->nslots;
}

static void set_value(struct vm_map *m, uint32_t i, const void *v, unsigned int slot,
		      bool fresh)
{
	/* slots past the noted ones were never written: zero already */
	unsigned int n = vm_map_slots_used(m) ? vm_map_slots_used(m) : m->nslots;

	if (fresh && is_percpu(m->def.type)) {
		for (unsigned int s = 0; s < n; s++)
			memset(value(m, i, s), 0, m->vsz);
		if (slot >= n && slot < m->nslots)
			memset(value(m, i, slot), 0, m->vsz);
	}
	memcpy(value(m, i, slot), v, m->def.value_size);
}

int vm_map_update(struct vm_map *m, const void *key, const void *v,
		  uint64_t flags, unsigned int slot)
{
	uint32_t k, mask, i, tomb = UINT32_MAX;
	int64_t at;

	if (slot >= m->nslots - m->base || flags > BPF_EXIST ||
	    m->def.type == BPF_MAP_TYPE_RINGBUF || m->def.type == BPF_MAP_TYPE_STACK_TRACE)
		return -EINVAL;
	slot += m->base;
	if (!is_hash(m->def.type)) {
		memcpy(&k, key, 4);
		if (k >= m->cap)
			return -E2BIG;
		if (flags == BPF_NOEXIST)
			return -EEXIST;
		memcpy(value(m, k, slot), v, m->def.value_size);
		return 0;
	}
	if (!lock(m))
		return -EBUSY;
	at = find(m, key);
	if (at >= 0) {
		if (flags == BPF_NOEXIST) {
			unlock(m);
			return -EEXIST;
		}
		memcpy(value(m, vidx(m, (uint32_t)at), slot), v, m->def.value_size);
		unlock(m);
		return 0;
	}
	if (flags == BPF_EXIST || *m->count >= m->def.max_entries) {
		unlock(m);
		return flags == BPF_EXIST ? -ENOENT : -E2BIG;
	}
	mask = m->cap - 1;
	i = hash(key, m->def.key_size) & mask;
	for (;; i = (i + 1) & mask) {
		uint32_t st = *(uint32_t *)entry(m, i);

		if (st == E_DEAD && tomb == UINT32_MAX)
			tomb = i;
		if (st == E_EMPTY)
			break;
	}
	if (tomb != UINT32_MAX)
		i = tomb;
	((uint32_t *)entry(m, i))[1] = *m->nfree ? m->free_vals[--*m->nfree]
						 : (*m->next_val)++;
	memcpy(entry(m, i) + 8, key, m->def.key_size);
	set_value(m, vidx(m, i), v, slot, true);
	__atomic_store_n((uint32_t *)entry(m, i), E_FULL, __ATOMIC_RELEASE);
	(*m->count)++;
	unlock(m);
	return 0;
}

/* ---- stacks --------------------------------------------------------------- */

#define STACK_BUSY	1ull
#define STACK_PROBES	64u

int64_t vm_stack_intern(struct vm_map *m, const uint64_t *ips, uint32_t n)
{
	uint32_t depth = m->def.value_size / 8;
	uint64_t h = 0xcbf29ce484222325ull, tag;

	if (m->def.type != BPF_MAP_TYPE_STACK_TRACE || !n)
		return -EINVAL;
	if (n > depth)
		n = depth;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ ips[i]) * 0x100000001b3ull;
	h ^= h >> 29;
	tag = h | STACK_READY;
	for (uint32_t p = 0; p < STACK_PROBES && p < m->cap; p++) {
		uint32_t k = (uint32_t)((h + p) % m->cap);
		uint64_t *e = (uint64_t *)value(m, k, 0);
		uint64_t t = __atomic_load_n(e, __ATOMIC_ACQUIRE);

		if (t == tag && !memcmp(e + 1, ips, n * 8ull) && (n == depth || !e[1 + n]))
			return k;
		if (t || !__atomic_compare_exchange_n(e, &t, STACK_BUSY, false,
						      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;	/* another stack's, or one being written */
		memcpy(e + 1, ips, n * 8ull);
		memset(e + 1 + n, 0, (depth - n) * 8ull);
		__atomic_store_n(e, tag, __ATOMIC_RELEASE);
		return k;
	}
	return -ENOSPC;
}

int vm_map_delete(struct vm_map *m, const void *key)
{
	int64_t i;

	if (!is_hash(m->def.type))
		return -EINVAL;
	if (!lock(m))
		return -EBUSY;
	i = find(m, key);
	if (i >= 0) {
		__atomic_store_n((uint32_t *)entry(m, (uint32_t)i), E_DEAD, __ATOMIC_RELEASE);
		m->free_vals[(*m->nfree)++] = vidx(m, (uint32_t)i);
		(*m->count)--;
	}
	unlock(m);
	return i < 0 ? -ENOENT : 0;
}

void vm_map_clear(struct vm_map *m)
{
	/* (a holder that died: cleared all the same, and the lock freed) */
	(void)lock(m);
	/* A hash's values are zeroed when handed out again: clearing its
	 * entries is enough, and leaves the untouched pages untouched. */
	memset(m->entries, 0, is_hash(m->def.type)
	       ? (size_t)(m->values - m->entries)
	       : m->size - (size_t)(m->entries - (char *)m->mem));
	*m->count = *m->next_val = *m->nfree = 0;
	unlock(m);
}

/* ---- rings -------------------------------------------------------------- */

static struct ring *ring_of(const struct vm_map *m, unsigned int slot)
{
	return (struct ring *)(m->entries + (size_t)slot * m->slot_stride);
}

static void ring_copy(char *data, uint64_t size, uint64_t at, const void *src,
		      uint64_t n, bool out)
{
	uint64_t off = at & (size - 1), first = n < size - off ? n : size - off;

	if (out) {
		memcpy(data + off, src, first);
		memcpy(data, (const char *)src + first, n - first);
	} else {
		memcpy((void *)src, data + off, first);
		memcpy((char *)src + first, data, n - first);
	}
}

int vm_ring_output(struct vm_map *m, unsigned int slot, const void *data, uint64_t n)
{
	struct ring *r;
	uint64_t head, tail, need = 8 + align8(n), size = m->def.max_entries;
	uint32_t hdr[2] = { (uint32_t)n, 0 };

	if (m->def.type != BPF_MAP_TYPE_RINGBUF || slot >= m->nslots - m->base || n > size / 2)
		return -EINVAL;
	r = ring_of(m, slot + m->base);
	head = r->head;
	tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (head - tail + need > size)
		return -ENOSPC;
	ring_copy((char *)(r + 1), size, head, hdr, 8, true);
	ring_copy((char *)(r + 1), size, head + 8, data, n, true);
	__atomic_store_n(&r->head, head + need, __ATOMIC_RELEASE);
	return 0;
}

int vm_ring_drain(struct vm_map *m, unsigned int slot,
		  void (*f)(const void *data, uint32_t size, void *arg), void *arg)
{
	struct ring *r;
	uint64_t head, tail, size = m->def.max_entries;
	int n = 0;
	char *buf;

	if (m->def.type != BPF_MAP_TYPE_RINGBUF || slot >= m->nslots - m->base)
		return -EINVAL;
	buf = malloc(size / 2 + 8);
	if (!buf)
		return -ENOMEM;
	r = ring_of(m, slot + m->base);
	head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	for (tail = r->tail; tail < head; n++) {
		uint32_t hdr[2];

		ring_copy((char *)(r + 1), size, tail, hdr, 8, false);
		ring_copy((char *)(r + 1), size, tail + 8, buf, hdr[0], false);
		f(buf, hdr[0], arg);
		tail += 8 + align8(hdr[0]);
	}
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	free(buf);
	return n;
}
