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

#include "bpf/kbtf.h"
#include "probe/probe.h"

int probe_task_offsets(struct probe_task_offs *o)
{
	struct kbtf *btf = kbtf_open();
	long v[5], st, sg, live, sz;

	if (!btf)
		return -ENOENT;
	v[0] = kbtf_member_off(btf, "task_struct", "group_leader");
	v[1] = kbtf_member_off(btf, "task_struct", "thread_pid");
	v[2] = kbtf_member_off(btf, "pid", "level");
	v[3] = kbtf_member_off(btf, "pid", "numbers");
	v[4] = kbtf_member_off(btf, "upid", "nr");
	st = kbtf_member_off(btf, "task_struct", "start_boottime");
	sg = kbtf_member_off(btf, "task_struct", "signal");
	live = kbtf_member_off(btf, "signal_struct", "live");
	sz = kbtf_struct_size(btf, "upid");
	kbtf_free(btf);
	if (sz <= 0)
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
	struct kbtf *btf = kbtf_open();
	int err = 0;

	if (!btf)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		v[i] = kbtf_member_off(btf, want[i].type, want[i].member);
		if (v[i] < 0)
			err = -ENOENT;
	}
	kbtf_free(btf);
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
