/* SPDX-License-Identifier: MIT */
/*
 * fay agent internals: the pieces `fay agent` is built from, split so the
 * unit tests (tests/unit/agent/) can drive each one on its own.
 *
 *   shmfile.c  validating and inspecting a process's shm file (ring.h ABI)
 *   batch.c    encoding drained span records into a wire BATCH frame
 *   bqueue.c   the bounded queue of sealed batches between the two threads
 *   drain.c    the drain thread: rings -> batches, nothing else
 *   spool.c    the on-disk spool of unacknowledged batches and the cursor
 *              file (the durability protocol, see below and docs/ABI.md)
 *   ship.c     the connection to the collector (HELLO, BATCH window, ACK)
 *   agent.c    the main thread's epoll loop: discovery, spool writes,
 *              shipping, stats, signals
 *   main.c     option parsing, --help
 *
 * Two threads.  The drain thread only reads rings into sealed in-memory
 * batches (bqueue.c, bounded): it never waits for the disk, /proc or the
 * network.  The main thread writes those batches to the spool, persists
 * the cursors, ships, and does everything else (the I/O that may stall).
 *
 * Durability protocol.  Every batch is written to the spool (the complete
 * wire frame, followed by a trailer holding the ring cursors at the end of
 * the batch; written to a temporary name and renamed) before anything
 * depends on it.  The cursor file is rewritten only now and then (about
 * once a second, and always before a spool file whose trailer it must
 * supersede is deleted: ACKed, WELCOME-covered or evicted), because every
 * spool file newer than it carries its own cursors.  After a crash the
 * cursors are the cursor file's, moved forward by the trailer of every
 * spooled batch newer than it, so each ring resumes exactly after the last
 * record that reached the spool: nothing is spooled twice.  Records that
 * were drained into memory but not yet spooled when the agent died are
 * read again from the ring if they are still there; if the producer has
 * overwritten them meanwhile the consumer finds a gap in the record
 * numbers and counts them lost (ring_overwrite): never delivered twice,
 * never lost silently.  A batch file is deleted only once the cursor file
 * covers it, and only on the collector's ACK (or when WELCOME says it was
 * committed), or evicted (oldest first, counted) when the spool is full.
 */
#ifndef FAY_AGENT_AGENT_H
#define FAY_AGENT_AGENT_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <fay/ring.h>

#include "common/spanrec.h"
#include "common/wire.h"

/* ---- shm files (shmfile.c) ---------------------------------------------- */

/* Limits beyond which a header is refused rather than read: what libfay
 * can make (64 MiB rings, FAY_RING_KB), and a file the agent may be made
 * to read (and a tmpfs to allocate, by read faults) whole. */
#define SHM_MAX_RINGS      4096u
#define SHM_MAX_RING_SLOTS (1u << 20)
#define SHM_MAX_POOL       (1u << 20)
#define SHM_MAX_POOL_STRIDE (1u << 16)
#define SHM_MAX_FILE_SIZE  (UINT64_C(4) << 30)

/*
 * Check everything in the header h of a file of st_size bytes named name
 * (the base name, "fay-<pid>-<instance hex>.shm"; NULL skips the name
 * check).  Returns 0 when the file can be consumed, -EAGAIN when it is not
 * ready yet (state INIT, or still too small to hold a header), or -EBADMSG
 * with the offending field and its value in err.
 */
int shm_hdr_validate(const struct fay_shm_hdr *h, uint64_t st_size,
		     const char *name, char *err, size_t errlen);

/* Parse "fay-<pid>-<hex>.shm".  Returns 0 or -EINVAL. */
int shm_name_parse(const char *name, uint32_t *pid, uint64_t *instance);

/* Number of span handles in the pool of a validated file still marked
 * FAY_POOL_OPEN (spans begun but never ended). */
uint32_t shm_pool_open_count(const void *base, const struct fay_shm_hdr *h);

/*
 * Is process pid the owner of the file (dev, ino)?  Reads
 * /proc/<pid>/maps: 1 when a mapping of that inode is there, 0 when the
 * process does not map it (gone, pid reused, or it unmapped the file),
 * -errno when the maps cannot be read (then the caller decides).
 */
int shm_pid_maps_file(uint32_t pid, dev_t dev, ino_t ino);

/*
 * A traced process can shrink its file under the agent's mapping; a read
 * of a page past the new end raises SIGBUS.  shm_guard_install() sets a
 * SIGBUS handler for the process (call once, before any mapping is read);
 * shm_guarded() runs fn(arg) so that such a SIGBUS in the calling thread
 * abandons fn and returns -EFAULT instead of killing the agent.  Any other
 * SIGBUS (no guard in that thread) still kills the process, as it would
 * without the handler.  fn may stop at any read of a mapping: it must not
 * hold a lock then, and must keep what it allocated reachable.
 * Returns fn's value, or -EFAULT.
 */
int shm_guard_install(void);
int shm_guarded(int (*fn)(void *arg), void *arg);

/*
 * Is the file's owner (uid) allowed for process pid?  Yes when uid is the
 * agent's effective uid or root, or the owner of the running process pid;
 * a file naming a process that is not running is accepted (its records
 * are drained and it is removed).  Returns 1, or 0 with the reason in err.
 */
int shm_owner_ok(uint32_t pid, uid_t uid, char *err, size_t errlen);

/* ---- batches (batch.c) --------------------------------------------------- */

#define BATCH_MAX_BYTES (1u << 20)
#define BATCH_MAX_SPANS 8192u

/* A BATCH frame being built: buf holds the wire header, then the payload
 * (uint32 count, then count x (uint32 len, span record)). */
struct batch {
	uint8_t *buf;
	uint32_t cap;           /* payload bytes the frame may carry */
	uint32_t len;           /* payload bytes so far (>= 4) */
	uint32_t count;
	uint32_t max_spans;
};

/* The LOCAL_EP item a process's spans get when they carry none, encoded
 * once per process. */
struct ep_item {
	uint32_t len;           /* 0: none */
	uint8_t buf[SPANREC_ITEM_HDR + 8 + 64 + 48];
};

/* Allocate a batch able to carry cap payload bytes and max_spans spans.
 * Returns 0 or -ENOMEM; batch_free() releases it. */
int batch_init(struct batch *b, uint32_t cap, uint32_t max_spans);
void batch_free(struct batch *b);
void batch_reset(struct batch *b);

/* Encode the endpoint (service, ip text, port) as a LOCAL_EP item.
 * Strings are cut at their field size. */
void ep_item_init(struct ep_item *ep, const char *service, const char *ip,
		  uint16_t port);

/*
 * Append the span record rec (reclen bytes, already decoded into r) to b,
 * adding ep as its local endpoint when r has none (ep may be NULL).
 * Returns 0, -ENOSPC when the batch is full (nothing appended: flush and
 * retry), or -E2BIG when the span could never fit in an empty batch.
 */
int batch_add(struct batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep);

/* Write the frame header for sequence number seq; returns the frame size
 * (header + payload), the frame being at b->buf. */
uint32_t batch_seal(struct batch *b, uint64_t seq);

/*
 * Walk a received BATCH payload: calls fn for each span record (not
 * decoded).  Returns the span count or -EBADMSG with a reason in err.
 * (Used by the tests and the spool loader to count spans.)
 */
int batch_walk(const void *payload, uint32_t len,
	       int (*fn)(void *ctx, const void *rec, uint32_t len), void *ctx,
	       char *err, size_t errlen);

/* ---- cursors and spool (spool.c) ----------------------------------------- */

/* Where a ring's consumer stands: the next slot position and the next
 * record number, for the ring'th ring of the file with this instance. */
struct cursor {
	uint64_t instance;
	uint32_t ring;
	uint32_t _pad;
	uint64_t pos;
	uint64_t rec_no;
};

struct cursor_tab {
	struct cursor *v;
	uint32_t n, cap;
	uint64_t seq;           /* every batch <= seq is covered */
};

void cursor_tab_free(struct cursor_tab *t);
/* Insert or move forward (never backward) the cursor of (instance, ring).
 * Returns 0, or -ENOMEM (only when inserting beyond cursor_tab_reserve). */
int cursor_tab_set(struct cursor_tab *t, const struct cursor *c);
/* Make room for n more cursors, so that n inserts cannot fail. */
int cursor_tab_reserve(struct cursor_tab *t, uint32_t n);
const struct cursor *cursor_tab_get(const struct cursor_tab *t,
				    uint64_t instance, uint32_t ring);
/* Forget every cursor of instance. */
void cursor_tab_forget(struct cursor_tab *t, uint64_t instance);

/*
 * Read the cursor file at path into t (emptied first).  A missing file
 * gives an empty table.  Returns 0, or -EBADMSG naming the line that is
 * wrong in err (t is then empty), or -errno.
 */
int cursor_load(const char *path, struct cursor_tab *t, char *err, size_t errlen);
/* Write t to path atomically (path.tmp, then rename); with sync, fsync
 * the file and its directory.  Returns 0 or -errno. */
int cursor_save(const char *path, const struct cursor_tab *t, int sync);

struct spool_ent {
	struct spool_ent *next, *prev;
	uint64_t seq;
	uint64_t bytes;         /* whole file */
	uint32_t frame_len;     /* header + payload */
	uint32_t nspans;
	int sent;               /* sent on the current connection */
	int acked;              /* committed by the collector: the file stays
				 * until the cursor file covers it */
	uint64_t sent_ns;
};

struct spool {
	char *dir;              /* state-dir/spool */
	int dfd;
	uint64_t max_bytes;
	int sync;
	struct spool_ent head;  /* list sentinel, oldest first */
	uint64_t bytes, nbatches;
	uint64_t nsent;         /* entries with sent set (in flight) */
	uint64_t nacked;        /* entries with acked set (waiting for a save) */
	uint64_t max_seq;       /* highest seq ever seen in the spool */
	uint64_t evicted_batches, evicted_spans;
	uint64_t corrupt_files;
	/* The cursor file.  tab covers every batch in the spool (tab->seq is
	 * the newest spooled); the file on disk covers those <= saved_seq. */
	struct cursor_tab *tab;
	char *cursor_path;
	uint64_t saved_seq;
	int dirty;              /* tab differs from the file */
	uint64_t saves;         /* cursor file writes */
};

/*
 * Open (creating it) the spool directory dir, load the index of the
 * batches in it (checking each frame; a damaged file is reported, counted
 * and removed) and move the cursors in t (read from cursor_path by the
 * caller, t->seq saying which batches it covers) forward with the
 * trailers of the batches newer than t->seq.  The spool keeps t and
 * writes it back to cursor_path (spool_save_cursors).  Returns 0 or -errno.
 */
int spool_open(struct spool *sp, const char *dir, const char *cursor_path,
	       uint64_t max_bytes, int sync, struct cursor_tab *t);
void spool_close(struct spool *sp);

/*
 * Store the frame (frame_len bytes, nspans spans, seq from its header,
 * above every seq in the spool) with the ring cursors at its end (cur,
 * ncur), then move the cursor table forward with them.  Before writing,
 * evicts the oldest batches (counting the spans of those not ACKed) while
 * the spool would exceed its bound, saving the cursor file first when an
 * evicted batch is newer than it; the new batch itself is always kept.
 * Returns 0 or -errno (nothing stored, the table unchanged).
 */
int spool_put(struct spool *sp, const void *frame, uint32_t frame_len,
	      uint32_t nspans, const struct cursor *cur, uint32_t ncur);

/* The collector committed e: delete its file now if the cursor file
 * covers it, else at the next spool_save_cursors(). */
void spool_ack(struct spool *sp, struct spool_ent *e);

/*
 * Write the cursor table to the cursor file (tmp + rename; fsync with
 * sync), then delete the files of the ACKed batches it now covers.
 * Returns 0 or -errno (nothing deleted).
 */
int spool_save_cursors(struct spool *sp);

/* Forget every cursor of a shm file instance (its file is gone). */
void spool_forget(struct spool *sp, uint64_t instance);

/* Batches not yet acknowledged. */
static inline uint64_t spool_unacked(const struct spool *sp)
{
	return sp->nbatches - sp->nacked;
}

struct spool_ent *spool_find(struct spool *sp, uint64_t seq);
/* Delete the batch file of e and forget e.  Callers other than the spool
 * itself use it only for a file that cannot be read any more. */
void spool_drop(struct spool *sp, struct spool_ent *e);
/* Open e's file for reading the frame; returns an fd or -errno. */
int spool_open_ent(struct spool *sp, const struct spool_ent *e);

static inline struct spool_ent *spool_first(struct spool *sp)
{
	return sp->head.next == &sp->head ? NULL : sp->head.next;
}

static inline struct spool_ent *spool_next(struct spool *sp, struct spool_ent *e)
{
	return e->next == &sp->head ? NULL : e->next;
}

/* ---- the queue of sealed batches (bqueue.c) ------------------------------ */

struct proc;

/*
 * A batch drained from the rings and the ring cursors at its end, on its
 * way from the drain thread to the spool writer (the main thread).
 * retired: processes whose last records are in this batch (or earlier
 * ones); their files are removed once it is spooled.
 */
struct qbatch {
	struct qbatch *next;
	struct batch b;
	struct cursor *trail;
	uint32_t ntrail, trail_cap;
	struct proc *retired;   /* linked through proc->dnext */
};

/*
 * max batch buffers, allocated up front; the drain thread takes a free one (never waiting: NULL when all are in use),
 * fills it, and pushes it; the main thread takes them in order, spools
 * them, and gives them back.  efd (an eventfd) is written on every push.
 */
struct bqueue {
	pthread_mutex_t lock;
	struct qbatch *free;
	struct qbatch *head, **tailp;
	uint32_t nbufs, max, nqueued, hwm;
	int efd;
};

/* max buffers of BATCH_MAX_BYTES (at least 2).  Returns 0 or -errno.
 * bqueue_free() accepts a queue whose init failed. */
int bqueue_init(struct bqueue *q, uint32_t max);
void bqueue_free(struct bqueue *q);
/* A free buffer (reset, no trailer, nothing retired), or NULL when all
 * max are in use. */
struct qbatch *bqueue_get(struct bqueue *q);
/* Append a sealed batch and wake the main thread. */
void bqueue_push(struct bqueue *q, struct qbatch *b);
/* Wake the main thread without a batch. */
void bqueue_wake(struct bqueue *q);
/* The oldest pushed batch, still queued (NULL when none). */
struct qbatch *bqueue_peek(struct bqueue *q);
/* Remove the oldest (which bqueue_peek returned) and make it free. */
void bqueue_pop(struct bqueue *q);
/* Give back a buffer that was never pushed. */
void bqueue_put_back(struct bqueue *q, struct qbatch *b);
uint32_t bqueue_len(struct bqueue *q);

/* mkdir -p with mode 0700 for what it creates.  Returns 0 or -errno. */
int agent_mkdir_p(const char *path);

/* ---- the agent (agent.c) -------------------------------------------------- */

struct agent_opts {
	const char *collector;  /* host:port */
	const char *shm_dir;
	const char *state_dir;
	uint64_t spool_max;
	uint64_t flush_ns;
	uint64_t stats_ns;
	const char *host;
	const char *token;
	uint64_t queue_max;     /* bytes of drained batches waiting for the spool */
	int drain_nice;         /* nice value of the drain thread (0: unchanged) */
	int fsync;
	int shm_any_owner;      /* accept shm files whatever their owner */
};

/* Run the agent until SIGTERM/SIGINT.  Returns 0 or -errno (startup). */
int agent_run(const struct agent_opts *o);

#endif
