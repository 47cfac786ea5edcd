/* SPDX-License-Identifier: MIT */
/*
 * Private to the agent's main thread (src/agent/agent*.c): agent.c sets up
 * and runs the epoll loop, agent_files.c finds the shm files and follows
 * each process until it is gone, agent_spool.c writes the drain thread's
 * batches to the spool, retires processes, saves the cursor file and
 * makes the stats.  Everything here runs on the main thread only.
 */
#ifndef FAY_AGENT_AGENT_INT_H
#define FAY_AGENT_AGENT_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/bqueue.h"
#include "agent/drain.h"
#include "agent/ship.h"
#include "agent/spool.h"

enum ev_type { EV_TICK, EV_RETRY, EV_INOTIFY, EV_SIGNAL, EV_SOCK, EV_PROC, EV_QUEUE };

/*
 * A directory of shm files: the agent's own (--shm-dir), or a container's
 * /dev/shm reached through the root of a process in it (agent_roots.c).
 * Files are opened relative to fd, by a name with no '/', never by a
 * path: nothing in a container's directory tree is followed.
 */
struct shmdir {
	struct shmdir *next;
	int fd;                 /* O_RDONLY | O_DIRECTORY */
	int wd;                 /* its inotify watch, -1: none */
	dev_t dev;
	ino_t ino;
	int host;               /* the agent's --shm-dir */
	unsigned refs;          /* roots leading here, and processes from it */
	char label[64];         /* for the log: the path, or
				 * "/proc/PID/root/dev/shm" as first reached */
};

/* A (mount namespace, root directory) pair some process has, other than
 * the agent's own, and the shm directory it leads to (NULL: none, or the
 * agent's own). */
struct rootkey {
	struct rootkey *next;
	ino_t mntns;
	dev_t rdev;
	ino_t rino;
	struct shmdir *dir;
	uint64_t gen;           /* the last root scan that saw it */
};

struct pending {
	struct pending *next;
	struct shmdir *dir;
	char name[NAME_MAX + 1];
	uint64_t first_ns;
};

/* A file reported corrupt once: not looked at again unless replaced. */
struct badfile {
	struct badfile *next;
	struct shmdir *dir;
	char name[NAME_MAX + 1];
	dev_t dev;
	ino_t ino;
};

struct agent {
	const struct agent_opts *o;
	int epfd, tickfd, retryfd, inofd, sigfd;
	struct evsrc ev_tick, ev_retry, ev_ino, ev_sig, ev_sock, ev_queue;
	int lockfd;
	char agent_id[33];
	struct qclient *qc;	/* the query connection (cluster queries) */
	struct spantap *tap;	/* spans(...) queries: fed by the drain thread */
	struct flight *flight;	/* --flight: unsampled spans (NULL: none) */
	struct keepreg *keeps;	/* keep-mode queries' buffers (NULL: none) */
	uint64_t flight_dropped_logged;	/* flight.dropped when last logged */
	char cursors_path[PATH_MAX], stats_path[PATH_MAX];

	/* Every process from discovery to retirement (the drain thread has
	 * its own list of those it drains). */
	struct proc *procs;
	struct proc *dead;      /* retired this round of events, freed after it */
	struct pending *pending;
	struct badfile *bad;
	int retry_armed;

	/* shm directories: the agent's own first, then containers' */
	struct shmdir *dirs;
	struct rootkey *roots;
	uint64_t root_gen, next_root_scan;
	ino_t own_mntns;
	dev_t own_rdev;
	ino_t own_rino;
	dev_t own_shm_dev;      /* the agent's root's /dev/shm: the host's, */
	ino_t own_shm_ino;      /* never a container's */
	int roots_off;          /* --no-containers, or no openat2() */
	uint64_t root_scans, root_scan_max_ns, root_scan_last_ns, ctr_dirs_seen;

	struct bqueue q;
	struct drain drain;
	int q_ready, drain_ready;
	struct cursor_tab cursors;
	struct spool spool;
	struct ship ship;
	uint64_t next_seq;
	int spool_blocked;      /* the last spool write failed: retried on ticks */
	uint64_t next_save_ns;

	uint64_t procs_seen, procs_gone, corrupt_files;
	uint64_t batches_spooled, spans_spooled;
	uint64_t max_put_ns, max_save_ns;
	uint64_t start_ns, next_stats_ns;

	int stopping;
	uint64_t stop_deadline;

	/* Testpoints (tests only).  FAY_AGENT_CRASH_AFTER_SPOOL=N kills the
	 * agent with SIGKILL right after its Nth batch reached the spool,
	 * before the cursor file is saved: the window the spool trailers
	 * cover.  FAY_AGENT_TEST_HOLD_SPOOL=FILE: while FILE exists, no
	 * batch is written to the spool (a disk that does not answer). */
	long crash_after_spool;
	const char *hold_spool;
};

/* ---- agent.c ---- */

/* Arm timerfd fd: first expiry in first_ns, then every interval_ns (0:
 * once); 0 and 0 disarm it. */
void agent_arm_timer(int fd, uint64_t first_ns, uint64_t interval_ns);

/* ---- agent_files.c ---- */

/* Close p's pidfd (out of the epoll set), release its consumers and
 * mapping, free p.  NULL is a no-op. */
void agent_proc_free(struct agent *a, struct proc *p);
/* p's process is gone (why says how, for the log): the drain thread
 * drains it a last time and hands it back for retirement.  Once only. */
void agent_mark_gone(struct agent *a, struct proc *p, const char *why);
/* Try the files not ready yet again; give up (reported once, the file
 * marked bad) on those still not ready after PENDING_GIVEUP_NS (5 s).
 * Disarms the retry timer when none is left. */
void agent_retry_pending(struct agent *a, uint64_t now);
/* Look at every file of shm directory d (start, defer or reject it). */
void agent_scan_dir(struct agent *a, struct shmdir *d, uint64_t now);
/* After the first scan: forget the saved cursors of files that are gone. */
void agent_prune_cursors(struct agent *a);
/* Read the inotify fd dry: each new file is looked at, an overflowed
 * queue rescans the directory. */
void agent_on_inotify(struct agent *a, uint64_t now);
/* Processes due for it: do they still map their file?  If not,
 * agent_mark_gone(). */
void agent_check_owners(struct agent *a, uint64_t now);

/* ---- agent_roots.c ---- */

/* The agent's own shm directory (--shm-dir) as the first of a->dirs, and
 * what the root scans compare with (the agent's mount namespace and
 * root).  0, or -errno (logged). */
int agent_dirs_init(struct agent *a);
/* Due every ROOT_SCAN_NS (1 s): every process's (mount namespace, root)
 * pair; a new one other than the agent's leads to its /dev/shm (opened
 * inside that root, nothing followed out of it), watched and scanned; a
 * pair no process has any more lets its directory go. */
void agent_scan_roots(struct agent *a, uint64_t now);
/* One reference to d less (a root or a process); the last closes it. */
void agent_dir_put(struct agent *a, struct shmdir *d);
/* The directory of inotify watch wd, or NULL. */
struct shmdir *agent_dir_of_wd(struct agent *a, int wd);
/* Close every directory and forget every root (the agent's end). */
void agent_dirs_free(struct agent *a);

/* ---- agent_spool.c ---- */

/* Save the cursor file if it is behind the spool or ACKed batch files
 * wait for it: at most once per CURSOR_SAVE_NS (1 s) unless force. */
void agent_maybe_save(struct agent *a, uint64_t now, int force);
/* The queue's eventfd fired (or a tick retries): spool every queued
 * batch in order, retire the processes they finish, pump the shipper.
 * Stops at the first batch the spool refuses (spool_blocked, retried on
 * the next tick) or while FAY_AGENT_TEST_HOLD_SPOOL's file exists. */
void agent_on_queue(struct agent *a, uint64_t now);
/* Write STATE-DIR/stats.json (failure only logged at debug level) and,
 * with send, send the same JSON to the collector as a STATS message. */
void agent_do_stats(struct agent *a, uint64_t now, int send);

#endif
