/* SPDX-License-Identifier: MIT */
/*
 * The drain thread (drain.c, drain_thread.c): reads every ring of every
 * traced process into sealed in-memory batches (struct bqueue), and
 * nothing else.  The main thread (agent*.c) finds the files, writes the
 * batches to the spool, persists cursors, ships, and watches processes;
 * it hands each process over with drain_add() and tells the drain thread
 * when it is gone with drain_gone().
 *
 * Ownership of a struct proc: the main thread fills it and initialises
 * its consumers (proc_init_cons), then drain_add() gives it to the drain
 * thread, which alone touches cons, in_batch, ep and n from then on.  When
 * the process is gone the drain thread drains it a last time, counts what
 * can no longer arrive, and links it to the retired list of the batch
 * holding its last records; the main thread gets it back from that batch
 * once the batch is spooled (bqueue), and only then removes the file.
 * The fields the main thread reads while the drain thread owns the proc
 * (name, path, pid, vpid, tags, dev, ino, instance) never change.
 */
#ifndef FAY_AGENT_DRAIN_H
#define FAY_AGENT_DRAIN_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/batch.h"
#include "agent/bqueue.h"
#include "agent/shmfile.h"
#include "agent/spool.h"
#include "common/ring/ring.h"
#include "common/tscmap.h"

struct spantap;
struct flight;
struct shmdir;

/* The epoll tag of agent.c: the first member of every event source. */
struct evsrc {
	int type;
};

/* Losses and counts of one process (also summed for the agent). */
struct proc_counts {
	uint64_t drained;       /* span records drained into batches */
	uint64_t bad;           /* records that failed to decode */
	uint64_t other;         /* records of a type the agent does not ship */
	uint64_t ring_lost;     /* overwritten before being read, or never read */
	uint64_t corrupt;       /* ring slots that made no sense */
	uint64_t died_mid_span; /* handles still open at exit */
	uint64_t too_big;       /* spans too large for a batch */
	uint64_t lost_no_handle, lost_no_ring, lost_too_big, truncated;
	uint64_t lost_nested, spans_started, spans_unsampled, bad_traceparent;
	uint64_t lost_no_room;
	uint64_t unsampled;     /* records of spans head sampling did not
				 * choose (FAY_RECORD=all): into the flight
				 * buffer, never into batches */
	uint64_t unsampled_off; /* of those, dropped: no flight buffer */
};

void proc_counts_add(struct proc_counts *to, const struct proc_counts *from);

struct proc {
	struct evsrc ev;        /* EV_PROC, for the pidfd (main thread) */
	struct proc *next;      /* the main thread's list */
	struct proc *dnext;     /* the drain thread's list; then a batch's
				 * retired list */
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
	char service[64];
	dev_t dev;
	ino_t ino;
	const uint8_t *base;
	size_t size;
	const struct fay_shm_hdr *live; /* counters and state; not trusted */
	struct fay_shm_hdr snap;        /* the validated layout */
	uint64_t instance;
	uint32_t pid;           /* the process in the agent's pid namespace
				 * (the file name's is in the process's own) */
	uint32_t vpid;          /* the file name's pid */
	struct tag_items tags;  /* its container (set before drain_add()) */
	char cgroup[64];        /* its cgroup path and container, as spans(...) */
	char container[64];     /* queries read them (set with tags) */
	struct shmdir *dir;     /* the directory of the file (main thread) */

	/* main thread */
	int pidfd;
	const char *gone_why;   /* set by drain_gone() (once) */
	uint64_t next_owner_check;

	/* the drain thread while the process lives, then the main thread */
	const char *why;        /* why it was finished */
	int shrunk;             /* a read of the mapping raised SIGBUS: the
				 * file shrank; never read it again */
	struct ring_cons *cons;
	uint8_t *in_batch;      /* ring has records in the current batch */
	struct ep_item ep;
	char ep_key[64 + 48 + 8];
	struct tsc_map clk;     /* its ticks to ns, from the TSC lines it
				 * published (version 2; clk.n 0: none yet) */
	struct proc_counts n;
};

/*
 * Allocate p's ring consumers, each resumed from its cursor in t (a
 * cursor beyond what the ring ever held is reported and reset).  Returns
 * the number of rings resumed, or -errno.
 */
int proc_init_cons(struct proc *p, const struct cursor_tab *t);
/* Free what proc_init_cons allocated and unmap the file (not p itself). */
void proc_release(struct proc *p);
/* Refresh p's counters from its (live) header and its consumers. */
void proc_read_counts(struct proc *p);

/* What the drain thread publishes for the stats (drain_stats()). */
struct drain_stats {
	struct proc_counts n;   /* every process it had: live and finished */
	uint64_t nrings;        /* rings of the live processes */
	uint64_t ticks;         /* drain passes */
	uint64_t max_gap_ns;    /* longest time between two passes */
	uint64_t max_pass_ns;   /* longest pass */
	uint64_t stalls;        /* times it found every batch buffer in use */
	uint64_t stalled_ns;    /* time spent so (rings not drained) */
	uint64_t sealed;        /* batches handed to the spool writer */
	uint64_t shrunk_files;  /* files that shrank under the mapping */
	uint32_t max_fill;      /* fullest ring at the last pass, 1/1024ths */
	int fast_tick;
};

struct drain {
	struct bqueue *q;
	uint64_t flush_ns;
	int nice;               /* for the thread (0: the agent's) */
	int tickfd, wakefd;
	pthread_t thread;
	int started;
	struct spantap *tap;    /* spans(...) queries; set before the start */
	struct flight *flight;  /* --flight: unsampled spans kept (NULL: they
				 * are dropped, counted); set before the start */

	pthread_mutex_t lock;   /* guards the next four */
	struct proc *incoming;  /* drain_add()ed, not yet taken */
	int stop;
	int done;               /* the thread made its last pass */
	struct drain_stats st;

	/* the drain thread's own */
	struct proc *procs;
	struct qbatch *cur;     /* the batch being filled */
	uint64_t last_seal_ns, last_pass_ns, stall_start_ns;
	struct proc_counts finished;
	struct drain_stats my;
};

/* Set up (no thread yet).  flush_ns: the normal tick and the least time
 * between two sealed batches.  Returns 0 or -errno. */
int drain_init(struct drain *d, struct bqueue *q, uint64_t flush_ns);
int drain_start(struct drain *d);
/* Hand p over to the drain thread (its consumers initialised). */
void drain_add(struct drain *d, struct proc *p);
/* p's process is gone (why: a static string): final drain, then retired. */
void drain_gone(struct drain *d, struct proc *p, const char *why);
/* Ask for a last pass (every ring drained, as far as buffers allow, the
 * batch sealed); drain_done() says when it is made. */
void drain_stop(struct drain *d);
int drain_done(struct drain *d);
void drain_get_stats(struct drain *d, struct drain_stats *st);
/* Join the thread and free what it still owns (its live procs too). */
void drain_free(struct drain *d);

/* One pass, in the calling thread (the thread loop and the tests). */
void drain_pass(struct drain *d, uint64_t now);

#endif
