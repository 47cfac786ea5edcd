/* SPDX-License-Identifier: MIT */
/*
 * tracefs: where it is, and the field lines of an event's format file.
 * One place for both the query front end (types and names of tp.FIELD)
 * and the probe providers (offsets to load at run time).
 */
#ifndef FAY_COMMON_TRACEFS_H
#define FAY_COMMON_TRACEFS_H

#include <stdbool.h>

#define TRACEFS_DIR         "/sys/kernel/tracing"
#define TRACEFS_DEBUGFS_DIR "/sys/kernel/debug/tracing"

/* Does dir hold a readable events/ directory? */
bool tracefs_has_events(const char *dir);

/*
 * The tracefs directory: TRACEFS_DIR or the debugfs one when either holds
 * events/, otherwise tracefs is mounted at TRACEFS_DIR (root only).
 * Returns NULL with errno set when none can be had.
 */
const char *tracefs_find(void);

struct tracefs_field {
	char name[64];
	char ctype[96];     /* as written: "pid_t", "char[16]", "__data_loc char[]" */
	int offset, size;
	bool is_signed;
	bool is_string;     /* char[N] (inline) or __data_loc char[] */
	bool data_loc;      /* u32 at offset: (len << 16) | record offset */
	bool is_array;      /* non-char array */
};

/*
 * Parse one line of a format file ("\tfield:char comm[16];\toffset:8;
 * \tsize:16;\tsigned:0;"; line is modified).  Returns 1 and fills f for a
 * field line, 0 for any other line, -EINVAL for a malformed field line.
 */
int tracefs_parse_field(char *line, struct tracefs_field *f);

/* At most this many events one tracepoint wildcard matches: each is a
 * perf event and a link (two fds), and the kernel takes ~10 ms to enable
 * a tracepoint for BPF here ("syscalls:*", 720 events, fits). */
#define TRACEFS_GLOB_MAX 1024

/*
 * The events of the tracefs at dir whose subsystem matches sys_pat and
 * whose name matches ev_pat (fnmatch(3) globs: * ? [...]), in the order
 * of strcmp() on "sys:event", each given to cb (a non-zero return stops
 * the walk and is returned).  Only events a BPF program can attach to:
 * those dir/available_events lists (every events/SYS/EVENT directory
 * when there is no such file, as in a directory of fixture formats),
 * without the ftrace subsystem's and the dynamic ones dir/dynamic_events
 * lists (kprobe, uprobe and synthetic events: another program type).
 * Returns how many matched (cb called for each), -E2BIG when more than
 * TRACEFS_GLOB_MAX match (cb not called; *nmatch says how many), or
 * -errno.
 */
int tracefs_glob(const char *dir, const char *sys_pat, const char *ev_pat,
		 int (*cb)(const char *sys, const char *event, void *arg), void *arg,
		 int *nmatch);

#endif
