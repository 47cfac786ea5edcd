/* SPDX-License-Identifier: MIT */
/*
 * The agent's durable state (spool.c, spool_load.c, spool_cursor.c): the
 * on-disk spool of unacknowledged batches and the cursor file (the
 * durability protocol is in agent.h and docs/ABI.md, "Agent spool and
 * cursor files").
 */
#ifndef FAY_AGENT_SPOOL_H
#define FAY_AGENT_SPOOL_H

#include <stdint.h>

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
	uint64_t damaged_spans; /* spans of damaged files, as far as their
				 * count could be read (0 when it could not) */
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

/* mkdir -p with mode 0700 for what it creates.  Returns 0 or -errno. */
int agent_mkdir_p(const char *path);

#endif
