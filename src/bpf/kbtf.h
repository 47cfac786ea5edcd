/* SPDX-License-Identifier: MIT */
/*
 * The running kernel's BTF (/sys/kernel/btf/vmlinux), for what fay asks
 * of it: a kernel function's id and number of parameters, every function
 * by name, and where a member sits in a struct (what a program reads
 * with bpf_probe_read_kernel(): fay's own CO-RE).  libbpf is seen by
 * src/bpf/ alone: load.c (maps, programs, links), rbuf.c (streamed
 * records) and kbtf.c (this).
 */
#ifndef FAY_BPF_KBTF_H
#define FAY_BPF_KBTF_H

#include <stdint.h>

struct kbtf;

/* The kernel's BTF, loaded and parsed (a few MB; a few ms).  NULL with
 * errno set when the kernel has none.  Free with kbtf_free(). */
struct kbtf *kbtf_open(void);
void kbtf_free(struct kbtf *b);

/* Kernel function name: its BTF id into *id (when id is not NULL) and
 * its number of parameters (0..), or -ENOENT when BTF has no such
 * function (-1 parameters when its prototype is missing). */
int kbtf_func(const struct kbtf *b, const char *name, uint32_t *id);

/* fn(name, nargs, ctx) for every function BTF describes, in id order
 * (nargs -1 when its prototype is missing); stops at the first nonzero
 * return of fn, which is returned; 0 when all were seen. */
int kbtf_each_func(const struct kbtf *b, int (*fn)(const char *name, int nargs, void *ctx),
		   void *ctx);

/* The byte offset of member in struct (or union) type, looking into
 * anonymous structs and unions; -ENOENT when either is missing or the
 * member is a bit field. */
long kbtf_member_off(const struct kbtf *b, const char *type, const char *member);

/* The size in bytes of struct type, or -ENOENT. */
long kbtf_struct_size(const struct kbtf *b, const char *type);

#endif
