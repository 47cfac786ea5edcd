/* SPDX-License-Identifier: MIT */
/*
 * Symbols of user-space binaries and libraries, for uprobes and USDT:
 * finding a library by its short name the way the dynamic loader would,
 * function symbols (.symtab, then .dynsym) and their file offsets, and
 * the SystemTap SDT notes (.note.stapsdt).
 */
#ifndef FAY_PROBE_ELFSYM_H
#define FAY_PROBE_ELFSYM_H

#include <stdbool.h>
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
/* The same in the file system under root (a directory such as
 * "/proc/PID/root", no trailing '/'; "" is this one): a name with a '/'
 * is taken under root, a library in root's own ld.so.cache and library
 * directories, a program in root's /usr/local/bin, /usr/bin, /bin and the
 * sbin ones (not fay's $PATH).  The path returned starts with root.  0
 * or -ENOENT. */
int elf_resolve_under(const char *root, const char *name, char *path, size_t len);
/* Does a library's file name answer to the short name want?  "libc"
 * matches "libc.so" and "libc.so.6"; a name with ".so" matches exactly
 * or up to a version dot. */
bool elf_lib_matches(const char *want, const char *soname);

/* The file offset of function sym in path (what a uprobe wants): its
 * st_value mapped through the PT_LOAD segment that holds it; for an
 * IFUNC symbol (strlen), the implementation this CPU selects
 * (elf_ifunc_target()).  A C++ function may be named demangled (sym
 * with "::", "(", "<" or "~", no symbol of that name): with its
 * parameter list as `nm -C` prints it ("ns::C::f(int, char const*)"),
 * or without one ("ns::C::f") when only one function has that name.
 * 0, -ENOENT (no such function), -ENOTUNIQ (a C++ name without
 * parameters of several overloads), -ENXIO (an IFUNC of a library fay
 * has not loaded: not resolved), -ENOEXEC (not an ELF file), -errno. */
int elf_func_offset(const char *path, const char *sym, uint64_t *off);

/* The function at file offset off of path: *size from its symbol and
 * *room up to the next symbol (at most 16, at least size), or, with no
 * symbol there, both from the call frame information (elf_fde_extent()).
 * 0 (from a symbol), 1 (from the call frame information), -ENOENT,
 * -errno. */
int elf_func_at(const char *path, uint64_t off, uint64_t *size, uint64_t *room);

/* IFUNC resolution (ifunc.c): the address (a vaddr of path) of the
 * implementation IFUNC sym resolves to in fay's own process, where
 * path is loaded (libc): the one this machine's CPU selects.  0,
 * -ENXIO (path is not loaded in fay), -ENOENT. */
int elf_ifunc_target(const char *path, const char *sym, uint64_t *vaddr);

/* The function whose call frame information (.eh_frame_hdr's table, its
 * FDE) covers vaddr of path: its start and size.  0, -ENOENT (none, or
 * an encoding other than the linkers' usual), -ENOEXEC, -errno. */
int elf_fde_extent(const char *path, uint64_t vaddr, uint64_t *start, uint64_t *size);

/* Whether some bytes of path's executable segment that holds file offset
 * off, outside [off, off + len), read as a direct jump or call (rel8,
 * rel32) into off + 1 .. off + len - 1: a second entry point into the
 * bytes a patch would replace (glibc's __mempcpy_* jumps into memmove's
 * second instruction).  A byte scan, not a disassembly: data that
 * happens to read so counts too (a refusal too many, never one too
 * few).  1 with *from the file offset of the first one, 0, -errno. */
int elf_jumps_into(const char *path, uint64_t off, uint64_t len, uint64_t *from);

/* Call cb for every defined function symbol (name, address, size), from
 * .symtab and .dynsym (a name may come twice).  Stops early when cb
 * returns non-zero and returns that.  0 or -errno. */
int elf_foreach_func(const char *path,
		     int (*cb)(const char *name, uint64_t addr, uint64_t size,
			       void *arg),
		     void *arg);

/* Call cb for every IFUNC symbol (name, its resolver's address, size),
 * as elf_foreach_func() does for functions. */
int elf_foreach_ifunc(const char *path,
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

/* Whether path's code throws or catches C++ exceptions: its symbols
 * (defined or imported) name __cxa_throw, __cxa_rethrow,
 * __gxx_personality_v0 or _Unwind_RaiseException.  An exception may then
 * unwind through its functions, which a kernel uretprobe (a return
 * address replaced by the kernel's trampoline, which has no call frame
 * information) breaks: the program aborts.  1, 0, -ENOEXEC, -errno. */
int elf_cxx_exceptions(const char *path);

/* Whether path is a program rather than a shared object, from the ELF
 * (the file's name says nothing: a library copied to any name can be
 * dlopen()ed): ET_EXEC; ET_DYN with DF_1_PIE in DT_FLAGS_1 (a PIE); an
 * ET_DYN with a PT_INTERP and no DT_SONAME (a PIE of a linker without
 * DF_1_PIE; libc.so.6 has a PT_INTERP but a soname).  1, 0, -ENOEXEC
 * (not an ELF executable or shared object), -errno. */
int elf_is_program(const char *path);

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
