/* SPDX-License-Identifier: MIT */
/*
 * The control channel of inline probes (docs/ABI.md, "Inline probes:
 * the control channel"): fay (query) and the in-process runtime
 * (libfay-probe.so, src/rt/) talk over a unix SOCK_SEQPACKET socket at
 * INLINE_RUN_DIR/PID.sock, one message per request and one reply each.
 *
 *	fay                                  runtime (process PID)
 *	SITES  {addr, size, name}[]     ->   patch_site_new() of each: ok / reason
 *	MAPS   nslots, defs[] + memfds  ->   maps the memfds (sizes checked)
 *	PROG   role, ctx_size, insns    ->   verified AGAIN here: ok / "insn N: ..."
 *	ARM                             ->   patches every site: ok / reason
 *	LATER  {dev, ino, off, size,..} ->   arms each whenever its object is
 *	                                     loaded (now, or at a dlopen), forgets
 *	                                     it at dlclose: ok / reason
 *	PID    pid, cgroup id           ->   the process as fay numbers it: ok
 *	UNWIND modules, a sealed memfd  ->   maps it read-only, checks it: the
 *	                                     stack walker's table (s.ustack)
 *	DETACH                          ->   restores every site: ok
 *	(close)                         ->   the same as DETACH
 *
 * Every message starts with struct inl_hdr; every request gets a struct
 * inl_reply.  One session at a time: a second connection is answered
 * with a reply of status -EBUSY and closed.
 */
#ifndef FAY_COMMON_INLINE_WIRE_H
#define FAY_COMMON_INLINE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define INLINE_RUN_DIR		"/run/fay/inline"
#define INLINE_MAGIC		0x6661796eu	/* "fayn" */
#define INLINE_VERSION		1
#define INLINE_MAX_SITES	256
#define INLINE_MAX_MAPS		16
/* Slots of the maps of one query (the VM's limit): one process's
 * window of them is at most the runtime's RT_MAX_SLOTS. */
#define INLINE_MAX_SLOTS	4096
/* A paired source's entry records per thread: one per level of nested
 * probed calls (recursion, signal handlers); deeper calls are not paired
 * (the programs count them: EC_DEPTH).  The pairs map is a per-slot
 * array of this many records, indexed by the call's level (fay_depth). */
#define INLINE_DEPTH		16
#define INLINE_DEPTH_STR	"16"
/* The context of the programs: the saved registers (struct patch_regs,
 * the layout of the kernel's x86-64 struct pt_regs). */
#define INLINE_CTX_SIZE		168
#define INLINE_MAX_MSG		(80u << 10)	/* a PROG of 8192 insns fits */

enum inl_type {
	INL_SITES = 1,
	INL_MAPS = 2,
	INL_PROG = 3,
	INL_ARM = 4,
	INL_DETACH = 5,
	/* fay run: the function is in no object of this image (a wrapper,
	 * sh -c 'exec prog'): the runtime lets it run and makes the
	 * process's next image (its exec, same pid) hold again */
	INL_NEXT = 6,
	/* sites of a shared object by file and offset, armed in the object
	 * whenever it is loaded: now, or when the program dlopen()s it
	 * (the runtime watches the loader's r_brk, rt/later.c); instead of
	 * or beside SITES, before ARM */
	INL_LATER = 7,
	/* fay run following exec: an image that maps no site (the wrapper
	 * of a wrapper): the held image runs on, unarmed, and the session
	 * stays open, idle, so that fay sees the process's next exec (the
	 * socket hangs up) after an INL_NEXT */
	INL_GO = 8,
	/* the process as fay sees it (before ARM): its pid in fay's pid
	 * namespace (the programs' get_current_pid_tgid() >> 32: s.pid,
	 * and the process of a user stack's key, whose maps fay reads) and
	 * its cgroup v2 id (get_current_cgroup_id(): s.cgroup, s.container);
	 * several processes feed one query's programs (a command's
	 * descendants, #25), so these are no constants of the programs */
	INL_PID = 9,
	/* the unwind table of the process's files (common/unwind_table.h)
	 * in one sealed memfd (F_SEAL_WRITE, F_SEAL_SHRINK), count its
	 * modules: the runtime's stack walker steps by its rows where a
	 * frame's pc has one (code without frame pointers), by frame
	 * pointers elsewhere; after MAPS, and again (up to 16 a session)
	 * whenever the process's executable mappings changed.  (9 is
	 * INL_PID, c25b's.) */
	INL_UNWIND = 10,
	INL_REPLY = 100,
};

struct inl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;		/* bytes of the whole message, header included */
	uint32_t count;		/* SITES: sites; MAPS: maps; PROG: insns */
};

struct inl_site {
	uint64_t addr;		/* in the process's address space */
	uint64_t size;		/* bytes of the function (its symbol's size) */
	uint64_t room;		/* bytes up to the next symbol (>= size): the
				 * function and its alignment padding */
	char name[64];		/* for messages */
	uint64_t cookie;	/* the programs' fay_cookie() at this site (a
				 * wildcard's function index: s.name) */
};

struct inl_later {
	uint64_t dev, ino;	/* the object's file (stat(): st_dev, st_ino) */
	uint64_t off;		/* the function's offset in that file */
	uint64_t size, room;	/* as struct inl_site's */
	char name[64];		/* the function, for messages */
	char obj[128];		/* the object's path, for messages */
	uint64_t cookie;	/* as struct inl_site's */
};

struct inl_map {
	uint32_t type, key_size, value_size, max_entries;
};

/* MAPS: struct inl_hdr, uint32_t nslots, uint32_t base, inl_map[count];
 * the memfds in SCM_RIGHTS, one per map, in order.  The maps have
 * nslots slots; this process writes those from base on (its threads'
 * slot s is the maps' base + s: vm_map_new_window()), so that several
 * processes feed one query's maps; 0 for a query of one process. */
/* PID: struct inl_hdr, uint32_t pid, uint32_t 0, uint64_t cgroup id. */
/* PROG: struct inl_hdr, uint32_t role (0 entry, 1 exit), uint32_t
 * ctx_size, struct bpf_insn[count] (a map load's imm: the map's index). */

struct inl_reply {
	struct inl_hdr h;
	int32_t status;		/* 0 or -errno */
	uint32_t nsites;	/* SITES: per-site results follow in msg */
	uint32_t pid;		/* the runtime's process */
	uint32_t nslots;	/* the slots the runtime can give threads */
	char msg[3072];		/* reason(s), one line each */
};

/* The socket path of pid's runtime into buf (INLINE_RUN_DIR/PID.sock). */
void inline_sock_path(pid_t pid, char *buf, size_t len);

/* Remove from INLINE_RUN_DIR the control sockets (PID.sock) and follow
 * marks (PID.next) of processes that are gone (kill(PID, 0) fails with
 * ESRCH) and that are older than a second (a process that took a freed pid
 * an instant ago keeps its new socket): a runtime removes its socket only
 * at a normal exit, so killed processes leave theirs.  Returns how many
 * files were removed; a missing directory is 0. */
int inline_sweep_stale(void);
/* Send one message (len bytes) with nfds file descriptors.  0 or -errno. */
int inline_send(int fd, const void *msg, size_t len, const int *fds, int nfds);
/* Receive one message into buf (cap bytes); up to *nfds descriptors into
 * fds (*nfds set to how many came; extra ones are closed).  Checks the
 * header (magic, version, len == bytes received).  Returns the length,
 * 0 at end of file, or -errno (-EPROTO: a malformed message). */
ssize_t inline_recv(int fd, void *buf, size_t cap, int *fds, int *nfds);
/* Fill a header for a message of type and len bytes. */
void inline_hdr(struct inl_hdr *h, enum inl_type type, size_t len, uint32_t count);

#endif
