// SPDX-License-Identifier: MIT
/*
 * Stack keys (plan.h "Stacks"): the maps the probes keep stacks in
 * (fay_stk, by the hash of their frames: codegen_stack.c; fay's VM: its
 * stack map), and the reader's side, which turns each stack id of a key
 * the probe built into the folded names of its frames.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "engine/inline.h"
#include "engine/ustack_map.h"
#include "probe/unwind.h"

int engine_stacks_map(struct engine *e)
{
	const struct plan *p = e->p;
	const char *how;

	if (!p->stack_depth)
		return 0;
	/* (each created in the kernel only if a program uses it: fay_stacks
	 * by fay's VM only) */
	e->stacks = bmap_new("fay_stacks", BPF_MAP_TYPE_STACK_TRACE, 4,
			     8u * (uint32_t)p->stack_depth, ENGINE_STACK_ENTRIES);
	e->stk = bmap_new("fay_stk", BPF_MAP_TYPE_HASH, 8, 8u * (uint32_t)p->stack_depth,
			  ENGINE_STACK_ENTRIES);
	e->stkscr = bmap_new("fay_stkscr", BPF_MAP_TYPE_PERCPU_ARRAY, 4,
			     8u * (uint32_t)p->stack_depth + 16, 1);	/* + its owner, n */
	e->ssym = e->stacks && e->stk && e->stkscr ? stacksym_new() : NULL;
	if (!e->ssym) {
		errno = e->stacks && e->stk && e->stkscr ? ENOMEM : errno;
		return -errno;
	}
	bmap_set_flags(e->stk, BPF_F_NO_PREALLOC);
	how = getenv("FAY_UNWIND");
	if (e->opts.pid <= 0 || engine_is_vm(e) || (how && !strcmp(how, "fp")))
		return 0;	/* (FAY_UNWIND=fp: frame pointers only, as inline) */
	/* a uprobe of one process may walk by its table (codegen_ustack.c) */
	e->unwind = bmap_new("fay_unwind", BPF_MAP_TYPE_HASH, 4, sizeof(struct ustk_tab),
			     USTK_PROCS);
	if (!e->unwind)
		return -errno;
	bmap_set_flags(e->unwind, BPF_F_NO_PREALLOC);
	return 0;
}

/* Whether pid is one of the command's descendants fay follows (the
 * follow map: a process leaves it at its exit) */
static bool followed(const struct engine *e, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	uint8_t v;

	return e->follow && !bmap_lookup(e->follow, &key, &v);
}

/* The signature pid's table in e->unwind was made from (0: none yet),
 * in its slot of e->ustk_procs, taken when it has none; a descendant no
 * longer followed gives its slot up, its table deleted.  NULL: every
 * slot is another's. */
static uint64_t *ustk_slot(struct engine *e, pid_t pid)
{
	int free = -1;

	for (int i = 0; i < USTK_PROCS; i++) {
		pid_t q = e->ustk_procs[i].pid;

		if (q == pid)
			return &e->ustk_procs[i].sig;
		if (q && q != e->opts.pid && !followed(e, q)) {
			uint32_t key = (uint32_t)q;

			bmap_delete(e->unwind, &key);
			e->ustk_procs[i].pid = q = 0;
		}
		if (!q && free < 0)
			free = i;
	}
	if (free < 0)
		return NULL;
	e->ustk_procs[free].pid = pid;
	e->ustk_procs[free].sig = 0;
	return &e->ustk_procs[free].sig;
}

void engine_ustack_update(struct engine *e, pid_t pid)
{
	struct ustk_tab *v;
	unsigned nmods, nrows;
	uint64_t sig, *have;
	struct stat st;
	char why[256];
	void *t = MAP_FAILED;
	int fd, err = -ENOMEM;
	uint32_t key = (uint32_t)pid;

	if (!e->unwind || bmap_fd(e->unwind) < 0 || pid <= 0 ||
	    (pid != e->opts.pid && !followed(e, pid)))
		return;		/* no program walks by it */
	sig = unwind_process_sig(pid, NULL);
	if (!sig)
		return;		/* gone */
	have = ustk_slot(e, pid);
	if (!have) {
		pr_info("pid %d: no unwind table for the kernel's walk (frame pointers): %u "
			"processes have one", (int)pid, USTK_PROCS);
		return;
	}
	if (sig == *have)
		return;		/* its executable mappings as they were */
	fd = unwind_process_memfd(pid, NULL, &nmods, &nrows, &sig, why, sizeof(why));
	if (fd < 0) {
		pr_info("pid %d: no unwind table for the kernel's walk (frame pointers): %s",
			(int)pid, why);
		*have = sig;	/* not again for these maps */
		return;
	}
	v = malloc(sizeof(*v));
	if (v && !fstat(fd, &st))
		t = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (t != MAP_FAILED) {
		err = ustk_pack(t, v, why, sizeof(why));
		if (!err)
			err = bmap_update(e->unwind, &key, v, BPF_ANY);
		if (!err)
			pr_debug("pid %d: its unwind table (%u modules, %u rows) in fay_unwind",
				 (int)pid, nmods, nrows);
		else if (err != -E2BIG)
			snprintf(why, sizeof(why), "%s", errstr(err));
		munmap(t, (size_t)st.st_size);
	} else {
		snprintf(why, sizeof(why), "out of memory");
	}
	if (err) {
		/* an older table would name the wrong frames: none */
		bmap_delete(e->unwind, &key);
		pr_info("pid %d: its unwind table is not in the kernel (frame pointers): %s",
			(int)pid, why);
	}
	*have = sig;
	free(v);
	close(fd);
}

/* Stack id's addresses in the inline runtime's stack table (the VM map
 * of e->stacks, shared with the process): 0 or -ENOENT. */
static int vm_lookup(struct engine *e, uint32_t id, uint64_t *ips)
{
	const struct engine_inline *in = engine_vm_inline(e);
	struct vm_map *m = in ? engine_inline_map(in, e->stacks) : NULL;
	const void *v = m ? vm_map_lookup(m, &id, 0) : NULL;

	if (!v)
		return -ENOENT;
	memcpy(ips, v, vm_map_def(m)->value_size);
	return 0;
}

/* The folded names of stack key k (its probe's part at b) into out. */
static void fold(struct engine *e, const struct plan_key *k, const unsigned char *b,
		 char *out)
{
	uint64_t ips[QUERY_STACK_DEPTH_MAX];
	int64_t id, pid = 0;
	uint32_t id32;
	int err;

	memcpy(&id, b, 8);
	if (k->stack == PSTACK_USER)
		memcpy(&pid, b + 8, 8);
	if (id == -ENOSPC) {
		/* inline: the runtime's stack table was full (the row counts
		 * the stacks lost); BPF: another thread's walk took the
		 * per-CPU scratch over (counted, EC_LOST) */
		snprintf(out, (size_t)k->size, "[lost]");
		return;
	}
	if (id < 0) {
		/* no stack: EFAULT (none of that kind here, e.g. a kernel
		 * stack in a uprobe), E2BIG (fay_stk full), ENOMEM ... */
		const char *n = strerrorname_np((int)-id);

		snprintf(out, (size_t)k->size, "[no %s stack: %s]",
			 k->stack == PSTACK_USER ? "user" : "kernel", n ? n : "?");
		return;
	}
	memset(ips, 0, sizeof(ips));
	if (id & ENGINE_STACK_ID_BIT) {
		/* its addresses under its hash (codegen_stack.c), a user or
		 * kernel stack as the key says */
		uint64_t h = (uint64_t)id;

		if (!e->stk || bmap_lookup(e->stk, &h, ips))
			snprintf(out, (size_t)k->size, "[stack %#llx gone]", (unsigned long long)h);
		else
			stacksym_fold(e->ssym, k->stack == PSTACK_USER, (pid_t)pid, ips,
				      k->depth, out, (size_t)k->size);
		return;
	}
	id32 = (uint32_t)id;
	err = e->vm ? vm_lookup(e, id32, ips) : bmap_lookup(e->stacks, &id32, ips);
	if (err) {
		snprintf(out, (size_t)k->size, "[stack %u gone]", id32);
		return;
	}
	stacksym_fold(e->ssym, k->stack == PSTACK_USER, (pid_t)pid, ips, k->depth,
		      out, (size_t)k->size);
}

void engine_stacks_key(struct engine *e, unsigned char *ukey, const unsigned char *bkey)
{
	const struct plan *p = e->p;

	memset(ukey, 0, (size_t)p->key_size);
	for (int i = 0; i < p->nkeys; i++) {
		const struct plan_key *k = &p->keys[i];

		if (k->stack)
			fold(e, k, bkey + k->bpf_offset, (char *)ukey + k->offset);
		else
			memcpy(ukey + k->offset, bkey + k->bpf_offset, (size_t)k->size);
	}
}

bool engine_stacks_tick(struct engine *e)
{
	const struct plan *p = e->p;
	unsigned char k[PLAN_KEY_MAX + 8], prev[PLAN_KEY_MAX + 8];
	size_t vk = (size_t)p->bpf_key_size + (e->epochs ? 8 : 0);
	bool user = false;
	long n = 0;

	for (int i = 0; i < p->nkeys; i++)
		user |= p->keys[i].stack == PSTACK_USER;
	if (!user || !e->ssym || !e->vals || !e->loaded)
		return user;
	engine_inl_unwind_tick(e);
	/* dlopen() in a -p process, in the command or its descendants */
	engine_ustack_update(e, e->opts.pid);
	for (int i = 0; i < USTK_PROCS; i++)
		if (e->ustk_procs[i].pid != e->opts.pid)
			engine_ustack_update(e, e->ustk_procs[i].pid);
	/* a walk that the probes change under it may repeat keys: bounded */
	while (n < 4L * p->max_entries &&
	       !(e->vm ? engine_vm_next_key(e, e->vals, n ? prev : NULL, k) :
		 bmap_next_key(e->vals, n ? prev : NULL, k))) {
		for (int i = 0; i < p->nkeys; i++) {
			int64_t pid;

			if (p->keys[i].stack != PSTACK_USER)
				continue;
			memcpy(&pid, k + p->keys[i].bpf_offset + 8, 8);
			stacksym_process(e->ssym, (pid_t)pid);
		}
		memcpy(prev, k, vk);
		n++;
	}
	return true;
}
