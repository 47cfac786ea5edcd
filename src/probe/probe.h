/* SPDX-License-Identifier: MIT */
/*
 * Probe points: where a generated program runs.  probe_new() resolves a
 * probe spec (a tracepoint's format, a function's BTF id or ELF offset, a
 * USDT note) without attaching anything; the code generator then asks the
 * probe to emit the IR that reads its arguments, return value and fields,
 * loads the program with the options probe_prog_opts() gives, and calls
 * probe_attach().  probe_detach() (and probe_free()) undo the attachment;
 * nothing stays in the kernel once the probe and the program are freed.
 *
 * Each kind is a provider (src/probe/provider.h), a table of functions in
 * the style of ply's, filling only the slots it needs.
 */
#ifndef FAY_PROBE_PROBE_H
#define FAY_PROBE_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/ir.h"
#include "bpf/load.h"

enum probe_kind {
	PROBE_TRACEPOINT,	/* "sched:sched_switch" */
	PROBE_SYSCALL,		/* "read": syscalls:sys_enter_read; "*": raw_syscalls:sys_enter */
	PROBE_SYSCALL_EXIT,	/* the matching sys_exit */
	PROBE_KFUNC,		/* kernel function entry: fentry, else kprobe */
	PROBE_KFUNC_EXIT,	/* its return: fexit, else kretprobe */
	PROBE_UPROBE,		/* "libc:read", "/path/bin:sym" */
	PROBE_URETPROBE,	/* the same, on return */
	PROBE_USDT,		/* "/path/bin:provider:name" (or "bin:name") */
	PROBE_PROFILE,		/* sampling on every CPU at opts.hz */
};

struct probe_opts {
	size_t sz;		/* sizeof(struct probe_opts) */
	pid_t pid;		/* uprobe/usdt: only this process (0: all) */
	unsigned int hz;	/* profile: samples per second per CPU */
	bool no_fentry;		/* kernel functions: go straight to kprobes */
};
#define probe_opts__last_field no_fentry

/* A tracepoint field, from its format file. */
struct probe_field {
	char name[64];
	char type[96];		/* as declared: "unsigned int", "char[16]" */
	int offset, size;
	bool is_signed;
	bool is_array;		/* "char comm[16]", "__data_loc char[] name" */
};

struct probe;

/*
 * Resolve spec for kind.  Returns NULL with errno set and a one-line
 * reason in err (errlen bytes) on failure: an unknown tracepoint or
 * syscall, a missing function or library, a kernel that allows neither
 * fentry nor kprobes.  Needs no privileges except for kernel functions
 * (fentry is tried by loading a trivial program).  Free with probe_free().
 */
struct probe *probe_new(enum probe_kind kind, const char *spec,
			const struct probe_opts *opts, char *err, size_t errlen);
/* Detach (if attached) and free.  Accepts NULL. */
void probe_free(struct probe *p);

enum probe_kind probe_kind(const struct probe *p);
/* "tracepoint syscalls:sys_enter_read", "fentry vfs_read",
 * "uprobe /usr/lib/x86_64-linux-gnu/libc.so.6:read+0x10e420" ... */
const char *probe_describe(const struct probe *p);
/* The attach mechanism: "tracepoint", "fentry", "fexit", "kprobe",
 * "kretprobe", "uprobe", "uretprobe", "usdt", "perf_event". */
const char *probe_mechanism(const struct probe *p);
/* The last error of probe_attach()/probe_emit_*(), "" if none. */
const char *probe_strerror(const struct probe *p);

/* Fill o (sz, type, attach_type, attach_btf_id) to load this probe's
 * program with bprog_load(). */
void probe_prog_opts(const struct probe *p, struct bprog_opts *o);

/* Number of arguments arg(n) may ask for, or -1 when not known
 * (uprobes: up to 6 register arguments). */
int probe_nargs(const struct probe *p);

/*
 * IR that puts a context value into dst.  Each returns 0, -ENOENT (no
 * such argument/field: the reason in probe_strerror()) or -EOPNOTSUPP
 * (this kind has no return value, no fields ...).
 *  arg(n): the n-th (0-based) argument as a 64-bit value (sign-extended
 *    when the tracepoint field or USDT spec says signed);
 *  ret: the return value (exit probes);
 *  field(name): a scalar tracepoint field (1, 2, 4 or 8 bytes).
 */
int probe_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n);
int probe_emit_ret(struct probe *p, struct ir *ir, ir_reg dst);
int probe_emit_field(struct probe *p, struct ir *ir, ir_reg dst, const char *name);
/* Copy an array field (e.g. char comm[16]) into the stack at off, at most
 * size bytes (the rest of size is zeroed).  0 or -errno. */
int probe_emit_field_copy(struct probe *p, struct ir *ir, int off,
			  unsigned int size, const char *name);

/* Tracepoint fields (without the common_ ones), NULL/0 for other kinds. */
const struct probe_field *probe_fields(const struct probe *p, size_t *n);

/* Uprobes: the binary, the function's file offset and its symbol name
 * (inline probes patch the same function in memory).  0, or -EINVAL for
 * other kinds. */
int probe_uprobe_site(const struct probe *p, const char **path, uint64_t *offset,
		      const char **sym);
/* A wildcard uprobe ("libc:pthread_mutex_*", probe_nsites() > 0): the
 * binary, the file offset and the name of its function i, whose
 * attachment carries i as its cookie (inline probes patch the same
 * functions in memory).  0, or -EINVAL past the end or for other
 * probes. */
int probe_uprobe_wsite(const struct probe *p, size_t i, const char **path, uint64_t *offset,
		       const char **sym);
/* Uprobes: how many files it is on: 1, or 1 + the other files of that
 * name mapped on the host for a library named by its short name in every
 * process ("libc:malloc": containers' own copies); 0 for other kinds. */
size_t probe_nfiles(const struct probe *p);
/* At most this many files one probe is on (probe_nfiles()). */
#define PROBE_MAX_FILES 256
/* Files left out because the probe was on PROBE_MAX_FILES already. */
size_t probe_files_capped(const struct probe *p);
/* Whether the probe is on a library by its short name in every process
 * ("libc:malloc" without a pid, not a wildcard): one whose files a
 * process started after the attach may add to (probe_follow_pid()); or
 * a uprobe on one process (any name, not a wildcard), which may exec
 * into another root (a chroot, a container) where the name is another
 * file. */
bool probe_follows_processes(const struct probe *p);
/*
 * For an attached probe that follows processes: attach it to the file
 * pid (the probe's own process when it has one, else any) sees under the
 * probe's library name (through its root and maps:
 * procroot.h; a container started after the attach has its own copy)
 * when that file (device and inode) is none of the probe's yet.  Returns
 * 1 with the file's path in path (len bytes) when it attached one, 0
 * when there is nothing new (the same file, a process gone, no such
 * library or function there), -E2BIG at PROBE_MAX_FILES (counted in
 * probe_files_capped()), else -errno with the reason in
 * probe_strerror().  A uprobe is on a file's inode: every process
 * mapping it, now or later, is covered.
 */
int probe_follow_pid(struct probe *p, pid_t pid, char *path, size_t len);
/*
 * The same for the file pid has just mapped executable at addr, size
 * bytes (a library loaded with dlopen() from anywhere, or from
 * LD_LIBRARY_PATH: what the library's name in pid's root does not find):
 * attach to it when it answers to the probe's library name and is none
 * of the probe's files yet.  Returns as probe_follow_pid().
 */
int probe_follow_mapping(struct probe *p, pid_t pid, uint64_t addr, uint64_t size, char *path,
			 size_t len);
/*
 * For an attached uprobe on one process (a command fay started, -c)
 * that follows its descendants: attach it, for process pid alone (a
 * descendant: a fork of the probe's process or of another descendant,
 * in any root or pid namespace), to the file pid sees under the probe's
 * library name (size 0: at an exec, through its root), or to the file it
 * has just mapped executable at addr, size bytes, when that answers to
 * the name.  A uprobe on one pid is on that process alone, whatever file
 * the others are on: each (descendant, file) once.  Returns as
 * probe_follow_pid() (-E2BIG at PROBE_MAX_KIDS).
 */
int probe_follow_child(struct probe *p, pid_t pid, uint64_t addr, uint64_t size, char *path,
		       size_t len);
/*
 * The file a command's descendant pid sees under the probe's BIN (as
 * probe_follow_child() resolves it at an exec, through its root), for
 * inline probes, which attach nothing here: 1 with path (as fay opens
 * it) and *sym (the function's name in the probe's spec), 0 when the
 * probe follows no processes (a wildcard, not a function) or the name is
 * not there.
 */
int probe_child_file(const struct probe *p, pid_t pid, char *path, size_t len,
		     const char **sym);
/* At most this many (descendant, file) attachments of one probe. */
#define PROBE_MAX_KIDS 1024
/* A wildcard function ("libc:pthread_mutex_*"): how many functions it
 * matched (0 for any other probe), and the name of function i, whose
 * attachment carries i as its BPF cookie; NULL past the end. */
size_t probe_nsites(const struct probe *p);
const char *probe_site_name(const struct probe *p, size_t i);
/* Uprobes, uretprobes and USDT probes: the binary they resolved to (a
 * path); NULL for other kinds. */
const char *probe_binary(const struct probe *p);
/* Attach the loaded program prog_fd.  0 or -errno with the reason in
 * probe_strerror() (EPERM: the privilege hint). */
int probe_attach(struct probe *p, int prog_fd);
/* Undo probe_attach(); safe to call twice. */
void probe_detach(struct probe *p);
bool probe_attached(const struct probe *p);

/* ---- the current task's pid in its namespace ------------------------------ */

/* Byte offsets, from the running kernel's BTF, of what leads from a task
 * to its process's pid in its own (innermost) pid namespace:
 * task->group_leader->thread_pid->numbers[thread_pid->level].nr. */
struct probe_task_offs {
	int group_leader, thread_pid;	/* in struct task_struct */
	int pid_level, pid_numbers;	/* in struct pid */
	int upid_nr, upid_size;		/* in struct upid, and its size */
	int start_boottime;		/* in struct task_struct (the start
					 * /proc/PID/stat gives in clock
					 * ticks), or -1: not in this kernel */
	int signal, signal_live;	/* task->signal->live (atomic_t: the
					 * process's threads not exited yet;
					 * 0 at its last thread's
					 * sched_process_exit), or -1 */
};
/* Fill o (reads the BTF each call: tens of ms).  0, or -ENOENT: no vmlinux BTF, or a
 * kernel whose structures lack one of these members. */
int probe_task_offsets(struct probe_task_offs *o);

/* Byte offsets, from the running kernel's BTF, of what leads from a task
 * and one of its file descriptors to the file's inode number and device:
 * task->files->fdt->fd[fd]->f_inode->{i_ino, i_sb->s_dev} (s_dev in the
 * kernel's encoding, major << 20 | minor). */
struct probe_file_offs {
	int task_files;			/* in struct task_struct */
	int files_fdt, fdt_fd;		/* in struct files_struct, struct fdtable */
	int file_inode;			/* in struct file */
	int inode_ino, inode_sb;	/* in struct inode */
	int sb_dev;			/* in struct super_block */
};
/* Fill o (reads the BTF: tens of ms).  0, or -ENOENT as probe_task_offsets(). */
int probe_file_offsets(struct probe_file_offs *o);

/* Byte offsets, from the running kernel's BTF, of what leads from a task
 * to the inode number of its mount namespace (what stat() of
 * /proc/PID/ns/mnt gives as st_ino): task->nsproxy->mnt_ns->ns.inum. */
struct probe_mntns_offs {
	int task_nsproxy;		/* in struct task_struct */
	int nsproxy_mnt_ns;		/* in struct nsproxy */
	int mnt_ns_inum;		/* in struct mnt_namespace (its ns's inum) */
};
/* Fill o (reads the BTF: tens of ms).  0, or -ENOENT as probe_task_offsets(). */
int probe_mntns_offsets(struct probe_mntns_offs *o);

/* ---- helpers shared with `fay probes` ------------------------------------ */

/* The tracefs mount point, mounting tracefs at /sys/kernel/tracing when
 * nothing is mounted (needs root).  NULL with errno set on failure. */
const char *tracefs_dir(void);

/* Parse tracefs events/SYS/EVENT/format.  *fields is malloc'ed (without
 * the common_ fields); *id the event id.  0 or -errno. */
int tracefs_format(const char *sys, const char *event, struct probe_field **fields,
		   size_t *nfields, int *id);

#endif
