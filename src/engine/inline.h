/* SPDX-License-Identifier: MIT */
/*
 * The engine's programs for fay's in-process VM (inline probes, src/vm/):
 * each map the generated code uses becomes a VM map with per-thread slots
 * in place of CPUs, and the entry (and exit) program is verified by the
 * VM's verifier and, when asked, compiled by its JIT.
 *
 *	struct engine_inline in;
 *	engine_inline_new(e, nslots, true, &in, err, sizeof(err));
 *	vm_run(in.entry, regs, env) ... vm_run(in.exit, regs, env)
 *	engine_inline_map(&in, e->vals)	 the slots the reader merges
 *	engine_inline_free(&in);
 */
#ifndef FAY_ENGINE_INLINE_H
#define FAY_ENGINE_INLINE_H

#include <stdbool.h>

#include "engine/engine.h"
#include "vm/vm.h"

struct bmap;

struct engine_inline {
	struct bmap *bmaps[VM_MAX_MAPS];
	struct vm_map *maps[VM_MAX_MAPS];
	int nmaps;
	struct vm_prog *entry, *exit;	/* exit NULL when the query needs none */
	/* The programs as verified, a map load's imm the index in maps[]
	 * (what the control channel sends a runtime: common/inline_wire.h) */
	struct bpf_insn *insns[2];	/* entry, exit */
	size_t ninsns[2];
};

/*
 * Lower e's programs (engine_new() with emit_only and a ring buffer for
 * streams) and build them for the VM with nslots per-thread slots.
 * 0, or -errno with a reason in err ("the entry program: insn 12: ...");
 * on failure nothing is left to free.
 */
int engine_inline_new(struct engine *e, unsigned int nslots, bool jit,
		      struct engine_inline *in, char *err, size_t errlen);
/* The same for a context of ctx_size bytes at r1 (engine_inline_new():
 * the 168 bytes of saved registers of a function() probe; spans(...):
 * plan.ctx_size). */
int engine_inline_new_ctx(struct engine *e, unsigned int nslots, bool jit, size_t ctx_size,
			  struct engine_inline *in, char *err, size_t errlen);
/* The same with the maps in memfds another process can map
 * (vm_map_new_fd(); vm_map_fd() of each map gives its memfd). */
int engine_inline_new_shared(struct engine *e, unsigned int nslots, size_t ctx_size,
			     struct engine_inline *in, char *err, size_t errlen);
/* The VM map standing for b, or NULL. */
struct vm_map *engine_inline_map(const struct engine_inline *in, const struct bmap *b);
/* Accepts a zeroed or freed struct. */
void engine_inline_free(struct engine_inline *in);

#endif
