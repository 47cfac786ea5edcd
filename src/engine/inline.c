// SPDX-License-Identifier: MIT
/*
 * Engine programs for the in-process VM (inline.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/ir.h"
#include "engine/engine_int.h"
#include "engine/inline.h"

static int map_index(struct engine_inline *in, struct bmap *b, unsigned int nslots,
		     bool shared)
{
	struct vm_map_def d = { bmap_type(b), bmap_key_size(b), bmap_value_size(b),
				bmap_max_entries(b) };

	for (int i = 0; i < in->nmaps; i++)
		if (in->bmaps[i] == b)
			return i;
	if (in->nmaps >= VM_MAX_MAPS)
		return -E2BIG;
	if (d.type == BPF_MAP_TYPE_RINGBUF)
		d.key_size = d.value_size = 0;
	if (d.type == BPF_MAP_TYPE_LRU_HASH)
		d.type = BPF_MAP_TYPE_HASH;	/* the VM's has no eviction: a full
						 * one refuses, as a kernel HASH */
	in->maps[in->nmaps] = shared ? vm_map_new_fd(&d, nslots, -1) : vm_map_new(&d, nslots);
	if (!in->maps[in->nmaps])
		return -errno;
	in->bmaps[in->nmaps] = b;
	return in->nmaps++;
}

static struct vm_prog *build(struct engine_inline *in, struct ir *ir, unsigned int nslots,
			     bool shared, size_t ctx_size, int role, char *err, size_t errlen)
{
	size_t n;
	const struct bpf_insn *insns = ir_insns(ir, &n);
	struct bpf_insn *c = malloc((n ? n : 1) * sizeof(*c));
	struct vm_prog *p;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(c, insns, n * sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		struct bmap *m = ir_insn_map(ir, i);
		int k;

		if (!m)
			continue;
		k = map_index(in, m, nslots, shared);
		if (k < 0) {
			snprintf(err, errlen, "map %s: %s", bmap_name(m), strerror(-k));
			free(c);
			return NULL;
		}
		c[i].imm = k;
	}
	p = vm_prog_new(c, n, in->maps, (size_t)in->nmaps, ctx_size, err, errlen);
	if (p) {
		in->insns[role] = c;
		in->ninsns[role] = n;
	} else {
		free(c);
	}
	return p;
}

int engine_inline_new(struct engine *e, unsigned int nslots, bool jit,
		      struct engine_inline *in, char *err, size_t errlen)
{
	/* the context of a function() probe: the saved registers */
	return engine_inline_new_ctx(e, nslots, jit, 168, in, err, errlen);
}

static int make(struct engine *e, unsigned int nslots, bool jit, bool shared, size_t ctx_size,
		struct engine_inline *in, char *err, size_t errlen)
{
	char why[512];
	int rc = 0;

	memset(in, 0, sizeof(*in));
	for (int i = 0; i < e->nprogs && !rc; i++) {
		struct eprog *ep = &e->progs[i];
		const char *role = ep->role == EP_ENTRY ? "entry" : "exit";
		struct vm_prog *p;

		rc = ir_lower(ep->ir);
		if (rc) {
			snprintf(err, errlen, "cannot lower the %s program: %s", role,
				 ir_strerror(ep->ir));
			break;
		}
		p = build(in, ep->ir, nslots, shared, ctx_size, ep->role == EP_ENTRY ? 0 : 1,
			  why, sizeof(why));
		if (!p) {
			snprintf(err, errlen, "the %s program: %s", role, why);
			rc = -EINVAL;
			break;
		}
		if (ep->role == EP_ENTRY)
			in->entry = p;
		else
			in->exit = p;
		if (jit && (rc = vm_prog_jit(p)))
			snprintf(err, errlen, "the %s program: JIT: %s", role, strerror(-rc));
	}
	if (!rc && !in->entry) {
		snprintf(err, errlen, "the query has no entry program");
		rc = -EINVAL;
	}
	if (rc)
		engine_inline_free(in);
	return rc;
}

int engine_inline_new_ctx(struct engine *e, unsigned int nslots, bool jit, size_t ctx_size,
			  struct engine_inline *in, char *err, size_t errlen)
{
	return make(e, nslots, jit, false, ctx_size, in, err, errlen);
}

int engine_inline_new_shared(struct engine *e, unsigned int nslots, size_t ctx_size,
			     struct engine_inline *in, char *err, size_t errlen)
{
	return make(e, nslots, false, true, ctx_size, in, err, errlen);
}

struct vm_map *engine_inline_map(const struct engine_inline *in, const struct bmap *b)
{
	for (int i = 0; i < in->nmaps; i++)
		if (in->bmaps[i] == b)
			return in->maps[i];
	return NULL;
}

void engine_inline_free(struct engine_inline *in)
{
	vm_prog_free(in->entry);
	vm_prog_free(in->exit);
	free(in->insns[0]);
	free(in->insns[1]);
	for (int i = 0; i < in->nmaps; i++)
		vm_map_free(in->maps[i]);
	memset(in, 0, sizeof(*in));
}
