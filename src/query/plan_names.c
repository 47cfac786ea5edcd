// SPDX-License-Identifier: MIT
/*
 * The probe's name (s.name): the table a plan builds from ids to names,
 * and the read side's rewrite of ids into names (plan.h, "The probe's
 * name").  A source with one probe point has one name, id 0; syscall("*")
 * names the system call's number that raw_syscalls gives, by the build's
 * <asm/unistd.h> (sysnr.h) and spelt as its tracepoint is where the two
 * differ (stat is syscalls:sys_enter_newstat), so s.name of syscall("*")
 * is what syscall("NAME") takes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cgroup.h"
#include "common/err.h"
#include "query/plan_int.h"
#include "query/sysnr.h"

#if defined(__x86_64__)
/* x86-64 system calls newer than many build machines' <asm/unistd.h>
 * (arch/x86/entry/syscalls/syscall_64.tbl); the header wins where it
 * has the number. */
static const struct sysnr sysnr_late[] = {
	{ 335, "uprobe" }, { 336, "uretprobe" },
	{ 451, "cachestat" }, { 452, "fchmodat2" }, { 453, "map_shadow_stack" },
	{ 454, "futex_wake" }, { 455, "futex_wait" }, { 456, "futex_requeue" },
	{ 457, "statmount" }, { 458, "listmount" }, { 459, "lsm_get_self_attr" },
	{ 460, "lsm_set_self_attr" }, { 461, "lsm_list_modules" }, { 462, "mseal" },
	{ 463, "setxattrat" }, { 464, "getxattrat" }, { 465, "listxattrat" },
	{ 466, "removexattrat" }, { 467, "open_tree_attr" }, { 468, "file_getattr" },
	{ 469, "file_setattr" },
};
#else
static const struct sysnr sysnr_late[] = { { -1, NULL } };
#endif

/* name as its syscalls:sys_enter_* tracepoint spells it, when tracefs
 * says so: stat -> newstat, sendfile -> sendfile64, umount2 -> umount. */
static const char *tp_spelling(struct planner *pl, const char *name)
{
	char alt[3][64];
	size_t n = strlen(name);

	if (n + 4 > sizeof(alt[0]) || tp_syscall_known(pl->q, name) != 0)
		return name;
	snprintf(alt[0], sizeof(alt[0]), "new%s", name);
	snprintf(alt[1], sizeof(alt[1]), "%s64", name);
	snprintf(alt[2], sizeof(alt[2]), "%s", name);
	while (n && alt[2][n - 1] >= '0' && alt[2][n - 1] <= '9')
		alt[2][--n] = '\0';
	for (int i = 0; i < 3; i++)
		if (tp_syscall_known(pl->q, alt[i]) == 1)
			return arena_strndup(pl->a, alt[i], strlen(alt[i])) ? : name;
	return name;
}

static int syscall_names(struct planner *pl, struct plan_names *t)
{
	int max = -1;

	for (size_t i = 0; i < sysnr_count; i++)
		max = sysnr_tab[i].nr > max ? sysnr_tab[i].nr : max;
	for (size_t i = 0; i < ARRAY_SIZE(sysnr_late); i++)
		max = sysnr_late[i].nr > max ? sysnr_late[i].nr : max;
	t->src = PN_CTX;
	t->ctx_off = 8;		/* raw_syscalls: common header, then long id */
	t->what = "system call";
	t->how = "raw_syscalls' number, named by <asm/unistd.h>";
	t->n = max + 1;
	TRYP(t->name = arena_alloc(pl->a, (size_t)(t->n + 1) * sizeof(*t->name)));
	for (size_t i = 0; i < sysnr_count; i++)
		t->name[sysnr_tab[i].nr] = tp_spelling(pl, sysnr_tab[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(sysnr_late); i++)
		if (sysnr_late[i].nr >= 0 && !t->name[sysnr_late[i].nr])
			t->name[sysnr_late[i].nr] = sysnr_late[i].name;
	return 0;
}

int plan_names_build(struct planner *pl)
{
	const struct ast_source *src = &pl->aq->src;
	struct plan_names *t;

	if (pl->p->names)
		return 0;
	TRYP(t = arena_alloc(pl->a, sizeof(*t)));
	if (src->kind == SRC_SYSCALL && !strcmp(src->arg, "*")) {
		int err = syscall_names(pl, t);

		if (err)
			return err;
		pl->p->names = t;
		return 0;
	}
	if (src->kind == SRC_TRACEPOINT && src->nnames) {
		t->src = PN_COOKIE;
		t->what = "event";
		t->how = "the events the pattern matches, by their attachment's cookie";
		t->name = src->names;
		t->n = src->nnames;
		pl->p->names = t;
		return 0;
	}
	if ((src->kind == SRC_UFUNC || src->kind == SRC_PFUNC || src->kind == SRC_KFUNC) &&
	    strpbrk(src->part[1], "*?[")) {
		t->src = PN_COOKIE;
		t->what = "function";
		t->how = "the functions the pattern matches, by their attachment's cookie";
		pl->p->names = t;
		return 0;
	}
	t->src = PN_CONST;
	t->n = 1;
	t->how = "one probe point";
	TRYP(t->name = arena_alloc(pl->a, 2 * sizeof(*t->name)));
	switch (src->kind) {
	case SRC_SYSCALL:
		t->what = "system call";
		t->name[0] = src->arg;
		break;
	case SRC_TRACEPOINT:
		t->what = "event";
		t->name[0] = src->part[1];
		break;
	case SRC_KFUNC:
		t->what = "function";
		t->name[0] = src->arg;
		break;
	case SRC_UFUNC:
	case SRC_PFUNC:
		t->what = "function";
		t->name[0] = src->part[1];
		break;
	case SRC_USDT:
		t->what = "probe";
		t->name[0] = src->part[2];
		break;
	default:
		t->what = "source";
		t->name[0] = src_kind_name(src->kind);
		break;
	}
	pl->p->names = t;
	return 0;
}

int query_plan_set_names(struct query *q, const char *const *names, int n)
{
	struct plan_names *t = q->plan ? (struct plan_names *)q->plan->names : NULL;
	const char **v;

	if (!t || t->src != PN_COOKIE || t->n || n < 0)
		return -EINVAL;
	if (!(v = arena_alloc(q->arena, ((size_t)n + 1) * sizeof(*v))))
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		if (!(v[i] = arena_strndup(q->arena, names[i], strlen(names[i]))))
			return -ENOMEM;
	t->name = v;
	t->n = n;
	return 0;
}

const char *plan_name_of(const struct plan *p, int64_t id, char *buf, size_t len)
{
	const struct plan_names *t = p->names;

	if (t && id >= 0 && id < t->n && t->name[id])
		return t->name[id];
	snprintf(buf, len, "%s_%" PRId64,
		 t && t->src == PN_CTX ? "syscall" : "site", id);
	return buf;
}

int64_t plan_name_id(const struct plan *p, const char *name, size_t len)
{
	const struct plan_names *t = p->names;

	for (int i = 0; t && i < t->n; i++)
		if (t->name[i] && strlen(t->name[i]) == len && !memcmp(t->name[i], name, len))
			return i;
	return -1;
}

/* The size bytes at s: an id in its first 8 bytes, then its name. */
static void name_in_place(const struct plan *p, unsigned char *s, int size)
{
	char buf[32];
	int64_t id;
	const char *n;
	size_t l;

	memcpy(&id, s, sizeof(id));
	n = plan_name_of(p, id, buf, sizeof(buf));
	l = strnlen(n, (size_t)size);
	memset(s, 0, (size_t)size);
	memcpy(s, n, l);
}

/* The size bytes at s: a cgroup id in its first 8 bytes, then its path
 * (f F_CGROUP) or container (F_CONTAINER). */
static void cgroup_in_place(enum field_id f, unsigned char *s, int size)
{
	char path[4096], c[QUERY_STR_MAX];
	const char *v = path;
	uint64_t id;

	memcpy(&id, s, sizeof(id));
	if (cgroup_path_of(id, path, sizeof(path)))
		snprintf(path, sizeof(path), "cgroup_%" PRIu64, id);
	else if (f == F_CONTAINER) {
		cgroup_container(path, c, sizeof(c));
		v = c;
	}
	cgroup_str_cut((char *)s, (size_t)size, v);
}

void plan_names_key(const struct plan *p, void *key)
{
	for (int i = 0; i < p->nkeys; i++) {
		if (p->names && p->keys[i].is_name)
			name_in_place(p, (unsigned char *)key + p->keys[i].offset,
				      p->keys[i].size);
		if (p->keys[i].cg != F_TIME)
			cgroup_in_place(p->keys[i].cg, (unsigned char *)key + p->keys[i].offset,
					p->keys[i].size);
	}
}

void plan_names_record(const struct plan *p, void *rec)
{
	for (int i = 0; i < p->ncols; i++) {
		if (p->names && p->cols[i].is_name)
			name_in_place(p, (unsigned char *)rec + p->cols[i].offset,
				      p->cols[i].size);
		if (p->cols[i].cg != F_TIME)
			cgroup_in_place(p->cols[i].cg, (unsigned char *)rec + p->cols[i].offset,
					p->cols[i].size);
	}
}
