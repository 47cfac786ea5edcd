// SPDX-License-Identifier: MIT
/*
 * Where the kernel keeps what a program reads of the current task (probe.h):
 * its pid in its own pid namespace (probe_task_offsets():
 * task->group_leader->thread_pid->numbers[level].nr) and the inode of one
 * of its file descriptors (probe_file_offsets()) and of its mount
 * namespace (probe_mntns_offsets()), the member offsets read
 * from the running kernel's BTF, so that a program reads them with
 * bpf_probe_read_kernel() (what CO-RE would relocate, done by fay when it
 * generates the program).
 */
#include <errno.h>
#include <string.h>

#include <bpf/btf.h>

#include "probe/probe.h"

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

int probe_task_offsets(struct probe_task_offs *o)
{
	struct btf *btf;
	int task, pid, upid, sig;
	long v[5], st, sg, live;
	__s64 sz;

	btf = btf__load_vmlinux_btf();
	if (!btf)
		return -ENOENT;
	task = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	pid = btf__find_by_name_kind(btf, "pid", BTF_KIND_STRUCT);
	upid = btf__find_by_name_kind(btf, "upid", BTF_KIND_STRUCT);
	v[0] = member_off(btf, task, "group_leader");
	v[1] = member_off(btf, task, "thread_pid");
	v[2] = member_off(btf, pid, "level");
	v[3] = member_off(btf, pid, "numbers");
	v[4] = member_off(btf, upid, "nr");
	st = member_off(btf, task, "start_boottime");
	sig = btf__find_by_name_kind(btf, "signal_struct", BTF_KIND_STRUCT);
	sg = member_off(btf, task, "signal");
	live = sig > 0 ? member_off(btf, sig, "live") : -ENOENT;
	sz = upid > 0 ? btf__resolve_size(btf, (uint32_t)upid) : -ENOENT;
	btf__free(btf);
	if (task <= 0 || pid <= 0 || upid <= 0 || sz <= 0)
		return -ENOENT;
	for (int i = 0; i < 5; i++)
		if (v[i] < 0)
			return -ENOENT;
	o->group_leader = (int)v[0];
	o->thread_pid = (int)v[1];
	o->pid_level = (int)v[2];
	o->pid_numbers = (int)v[3];
	o->upid_nr = (int)v[4];
	o->upid_size = (int)sz;
	o->start_boottime = st >= 0 ? (int)st : -1;
	o->signal = sg >= 0 && live >= 0 ? (int)sg : -1;
	o->signal_live = sg >= 0 && live >= 0 ? (int)live : -1;
	return 0;
}

/* One member of one struct, for offsets(). */
struct want {
	const char *type, *member;
};

/* v[i] = the offset of want[i].member in struct want[i].type, for i < n,
 * from the running kernel's BTF.  0, or -ENOENT (no BTF, or one missing). */
static int offsets(const struct want *want, size_t n, long *v)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int err = 0;

	if (!btf)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		int id = btf__find_by_name_kind(btf, want[i].type, BTF_KIND_STRUCT);

		v[i] = id > 0 ? member_off(btf, id, want[i].member) : -ENOENT;
		if (v[i] < 0)
			err = -ENOENT;
	}
	btf__free(btf);
	return err;
}

int probe_file_offsets(struct probe_file_offs *o)
{
	static const struct want want[] = {
		{ "task_struct", "files" }, { "files_struct", "fdt" }, { "fdtable", "fd" },
		{ "file", "f_inode" }, { "inode", "i_ino" }, { "inode", "i_sb" },
		{ "super_block", "s_dev" },
	};
	long v[7];

	if (offsets(want, 7, v))
		return -ENOENT;
	o->task_files = (int)v[0];
	o->files_fdt = (int)v[1];
	o->fdt_fd = (int)v[2];
	o->file_inode = (int)v[3];
	o->inode_ino = (int)v[4];
	o->inode_sb = (int)v[5];
	o->sb_dev = (int)v[6];
	return 0;
}

int probe_mntns_offsets(struct probe_mntns_offs *o)
{
	static const struct want want[] = {
		{ "task_struct", "nsproxy" }, { "nsproxy", "mnt_ns" },
		{ "mnt_namespace", "ns" }, { "ns_common", "inum" },
	};
	long v[4];

	if (offsets(want, 4, v))
		return -ENOENT;
	o->task_nsproxy = (int)v[0];
	o->nsproxy_mnt_ns = (int)v[1];
	o->mnt_ns_inum = (int)(v[2] + v[3]);
	return 0;
}
