/* SPDX-License-Identifier: MIT */
/*
 * Names for the frames of a stack the kernel walked (a BPF stack map's
 * addresses, innermost first): kernel addresses through /proc/kallsyms,
 * user addresses through the process's /proc/PID/maps and each mapped
 * file's ELF function symbols (.symtab, else .dynsym).  A stack folds into
 * one string, root first, frames separated by ';' ("main;a;b"), the form
 * flame graph tools read and the one that merges across hosts (the
 * addresses differ from host to host, the names do not).
 */
#ifndef FAY_PROBE_STACKSYM_H
#define FAY_PROBE_STACKSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stacksym;

/* An empty symbolizer (tables are read when first needed and kept: a
 * process's mappings at the first of its stacks it names, each file's
 * symbols once).  NULL on ENOMEM. */
struct stacksym *stacksym_new(void);
void stacksym_free(struct stacksym *s);

/* Read pid's mappings now, if they are not kept yet (a process's frames
 * are named by its mappings at the first of its stacks seen: a process
 * that has exited by then has none, and its frames are "[unknown]"). */
void stacksym_process(struct stacksym *s, pid_t pid);

/*
 * Fold the n addresses of ips (innermost first, as the stack map holds
 * them; a 0 ends the stack early) into buf (len bytes, NUL terminated),
 * root first.  user: ips are pid's user addresses, else the kernel's.
 * Every return address (all frames but the innermost) is named by the
 * address before it (the call instruction).  A frame without a symbol
 * is "FILE+0xOFF" (the file's base name, the offset in it) or
 * "[unknown]".  The innermost kernel frames of the probe itself
 * (bpf_prog_*, bpf_trampoline_*: an fentry program's) are left out.  When the names do not fit, the outermost frames are cut
 * and the string starts with "[cut]".  Returns the string's length.
 */
size_t stacksym_fold(struct stacksym *s, bool user, pid_t pid, const uint64_t *ips,
		     int n, char *buf, size_t len);

#endif
