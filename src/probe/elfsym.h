/* SPDX-License-Identifier: MIT */
/*
 * Symbols of user-space binaries and libraries, for uprobes and USDT:
 * finding a library by its short name the way the dynamic loader would,
 * function symbols (.symtab, then .dynsym) and their file offsets, and
 * the SystemTap SDT notes (.note.stapsdt).
 */
#ifndef FAY_PROBE_ELFSYM_H
#define FAY_PROBE_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Resolve a binary or library name to a path.  A name with a '/' is
 * taken as it is (it must exist); "libc", "libc.so" or "libc.so.6" are
 * looked up in /etc/ld.so.cache (64-bit entries) and then in the standard
 * library directories; any other name is searched in $PATH.  Returns 0 or
 * -ENOENT.
 */
int elf_resolve_path(const char *name, char *path, size_t len);

/* The file offset of function sym in path (what a uprobe wants): its
 * st_value mapped through the PT_LOAD segment that holds it.  0, -ENOENT
 * (no such function), -ENOEXEC (not an ELF file), -errno. */
int elf_func_offset(const char *path, const char *sym, uint64_t *off);

/* Call cb for every defined function symbol (name, address, size), from
 * .symtab and .dynsym (a name may come twice).  Stops early when cb
 * returns non-zero and returns that.  0 or -errno. */
int elf_foreach_func(const char *path,
		     int (*cb)(const char *name, uint64_t addr, uint64_t size,
			       void *arg),
		     void *arg);

/* elf_foreach_func() with each function's file offset (its st_value
 * mapped through the PT_LOAD segment that holds it) instead of its
 * address: what a /proc/PID/maps line turns a running address into.
 * Functions outside every loaded segment are skipped. */
int elf_foreach_func_offset(const char *path,
			    int (*cb)(const char *name, uint64_t off, uint64_t size,
				      void *arg),
			    void *arg);

/* One USDT probe site from .note.stapsdt, with file offsets. */
struct usdt_site {
	char provider[64];
	char name[64];
	char args[256];		/* "-4@%edi 8@-16(%rbp)" */
	uint64_t pc;		/* address (after .stapsdt.base adjustment) */
	uint64_t offset;	/* file offset of pc */
	uint64_t sema_offset;	/* file offset of the semaphore, 0 if none */
};

/* Call cb for every USDT site.  Stops early on non-zero.  0 or -errno. */
int elf_foreach_usdt(const char *path,
		     int (*cb)(const struct usdt_site *site, void *arg),
		     void *arg);

/* Does a glob pattern (fnmatch) match?  A NULL or empty pattern matches
 * everything. */
int glob_match(const char *pattern, const char *name);

#endif
