// SPDX-License-Identifier: MIT
/*
 * The kernel's BTF through libbpf's parser (kbtf.h).
 */
#include <errno.h>
#include <string.h>

#include <bpf/btf.h>

#include "bpf/kbtf.h"

struct kbtf *kbtf_open(void)
{
	struct btf *btf = btf__load_vmlinux_btf();

	if (!btf && !errno)
		errno = ENOENT;
	return (struct kbtf *)btf;
}

void kbtf_free(struct kbtf *b)
{
	btf__free((struct btf *)b);
}

/* The parameters of function type t, or -1 without its prototype. */
static int nargs_of(const struct btf *btf, const struct btf_type *t)
{
	const struct btf_type *proto = btf__type_by_id(btf, t->type);

	return proto ? btf_vlen(proto) : -1;
}

int kbtf_func(const struct kbtf *b, const char *name, uint32_t *id)
{
	const struct btf *btf = (const struct btf *)b;
	int i = btf ? btf__find_by_name_kind(btf, name, BTF_KIND_FUNC) : -ENOENT;

	if (i <= 0)
		return -ENOENT;
	if (id)
		*id = (uint32_t)i;
	return nargs_of(btf, btf__type_by_id(btf, (uint32_t)i));
}

int kbtf_each_func(const struct kbtf *b, int (*fn)(const char *name, int nargs, void *ctx),
		   void *ctx)
{
	const struct btf *btf = (const struct btf *)b;

	for (uint32_t id = 1; btf && id < btf__type_cnt(btf); id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const char *name;
		int rc;

		if (!btf_is_func(t))
			continue;
		name = btf__name_by_offset(btf, t->name_off);
		if (name && (rc = fn(name, nargs_of(btf, t), ctx)))
			return rc;
	}
	return 0;
}

/* The byte offset of member name in struct type id (looking into
 * anonymous structs and unions), or -ENOENT. */
static long member_off(const struct btf *btf, int id, const char *name)
{
	const struct btf_type *t = btf__type_by_id(btf, (uint32_t)id);
	const struct btf_member *m;

	if (!t || (!btf_is_struct(t) && !btf_is_union(t)))
		return -ENOENT;
	m = btf_members(t);
	for (unsigned short i = 0; i < btf_vlen(t); i++, m++) {
		const char *mn = btf__name_by_offset(btf, m->name_off);
		long bits = (long)btf_member_bit_offset(t, i), in;

		if (mn && !strcmp(mn, name))
			return bits % 8 ? -ENOENT : bits / 8;
		if (mn && *mn)
			continue;
		in = member_off(btf, (int)btf__resolve_type(btf, m->type), name);
		if (in >= 0)
			return bits / 8 + in;
	}
	return -ENOENT;
}

long kbtf_member_off(const struct kbtf *b, const char *type, const char *member)
{
	const struct btf *btf = (const struct btf *)b;
	int id = btf ? btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT) : -ENOENT;

	return id > 0 ? member_off(btf, id, member) : -ENOENT;
}

long kbtf_struct_size(const struct kbtf *b, const char *type)
{
	const struct btf *btf = (const struct btf *)b;
	int id = btf ? btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT) : -ENOENT;
	__s64 sz = id > 0 ? btf__resolve_size(btf, (uint32_t)id) : -ENOENT;

	return sz > 0 ? (long)sz : -ENOENT;
}
