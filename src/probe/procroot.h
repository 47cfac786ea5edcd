/* SPDX-License-Identifier: MIT */
/*
 * A process's own view of the machine (issue #25): the file system it
 * sees (its mount namespace and root: a container's) and its pid in its
 * own pid namespace.  A probe on one process resolves "libc" or
 * "/usr/bin/python3" there, through /proc/PID/root, not in fay's.
 */
#ifndef FAY_PROBE_PROCROOT_H
#define FAY_PROBE_PROCROOT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Does pid see another file system than fay (another mount namespace,
 * or another root directory: a container, a chroot)?  False when it
 * does not or cannot be told (no such process, no access). */
bool proc_other_root(pid_t pid);

/*
 * Resolve a binary or library name as pid sees it.  For a process that
 * sees fay's own file system, elf_resolve_path().  Else through
 * /proc/PID/root: first the files it maps executable (/proc/PID/maps: a
 * library by its short name as elf_lib_matches() says, a program by its
 * file name, a path with '/' as it is), then elf_resolve_under() in its
 * root.  The path returned is one fay opens, of the very inode the
 * process maps (uprobes, ELF reading and /proc/PID/maps all take it): the
 * mapped file's path when fay reaches it so (a chroot under fay's root),
 * else under /proc/PID/root, else /proc/PID/map_files/LO-HI.
 * 0, or -ENOENT.
 */
int proc_resolve_path(pid_t pid, const char *name, char *path, size_t len);

/*
 * The file of one line of /proc/PID/maps ("LO-HI PERMS OFF DEV INO
 * PATH") as a path fay opens, of the very inode mapped: maps shows the
 * path relative to fay's root when fay reaches it (a chroot under fay's
 * root), else relative to the file's own mount (a container's overlay):
 * the first of the path itself (same device and inode), the path under
 * /proc/PID/root and /proc/PID/map_files/LO-HI (a link to the mapped
 * file) whose inode is the mapped one.  0, or -ENOENT (no file, deleted, not reachable).
 */
int proc_mapped_path(pid_t pid, const char *line, char *path, size_t len);

/*
 * Every distinct file (by device and inode) that answers to name (as in
 * proc_resolve_path(): a library by its short name, a program by its
 * file name) and is mapped executable by some process of the host,
 * through every /proc/PID/maps: cb gets a path fay opens for it
 * (proc_mapped_path()), its device and inode.  A non-zero cb return
 * stops the walk and is returned; else 0.
 */
int proc_each_mapped(const char *name,
		     int (*cb)(const char *path, dev_t dev, ino_t ino, void *arg),
		     void *arg);

/*
 * Each line of /proc/PID/maps that maps a file executable: cb(the line
 * (its newline cut), its range [lo, hi), its file offset, its path (in
 * line), arg) until cb returns non-zero, which is returned; else 0.
 * -errno when the maps cannot be read (gone, or a kernel thread).
 */
int proc_each_exec_map(pid_t pid,
		       int (*cb)(const char *line, unsigned long long lo, unsigned long long hi,
				 unsigned long long off, const char *file, void *arg),
		       void *arg);

/*
 * The file pid maps executable at address addr, when it answers to name
 * (as in proc_resolve_path()): a path fay opens for it
 * (proc_mapped_path()) into path (len bytes).  One /proc/PID/maps read.
 * 0, or -ENOENT (nothing mapped there, not executable, another name, gone).
 */
int proc_mapped_at(pid_t pid, unsigned long long addr, const char *name, char *path,
		   size_t len);

/*
 * The file of the mapping pid has just made at addr, size bytes (an
 * mmap()'s result), when it answers to name: its stat into st.  Cheaper
 * than proc_mapped_at(): a readlink() and a stat() of
 * /proc/PID/map_files/LO-HI, no maps read (unless that entry is not
 * there: a mapping merged with its neighbour, or no CAP_SYS_ADMIN).
 * 0, or -ENOENT (another name, unmapped, gone).
 */
/* The stat of the file pid maps at addr, size bytes (whatever its name),
 * through /proc/PID/map_files/LO-HI.  0, or -errno (unmapped, gone). */
int proc_mapping_stat(pid_t pid, unsigned long long addr, unsigned long long size,
		      struct stat *st);
int proc_mapped_file(pid_t pid, unsigned long long addr, unsigned long long size,
		     const char *name, struct stat *st);

/* What makes a process's view of the file system: its mount namespace
 * (the inode of /proc/PID/ns/mnt) and its root directory (device and
 * inode of /proc/PID/root).  Processes with equal ids resolve every name
 * to the same files. */
struct proc_root_id {
	unsigned long long mnt_ns, root_dev, root_ino;
};
/* Fill id for pid (0: fay itself).  0, or -errno (-ENOENT: gone). */
int proc_root_id(pid_t pid, struct proc_root_id *id);

/* pid (a pid in fay's namespace) as its own, innermost pid namespace
 * numbers it (the last NSpid of /proc/PID/status): the same pid for a
 * process of fay's namespace, or of a kernel without NSpid.  -errno
 * (-ENOENT: no such process). */
pid_t proc_vpid(pid_t pid);

#endif
