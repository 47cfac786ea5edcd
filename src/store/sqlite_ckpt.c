// SPDX-License-Identifier: MIT
/*
 * The SQLite store's checkpoint thread.
 *
 * Checkpoints run off the write path: the writer connection has SQLite's
 * auto-checkpoint off, its WAL hook wakes a checkpoint thread once the WAL
 * holds CKPT_PAGES pages, and that thread copies the WAL into the database
 * (PASSIVE: never blocks the writer or readers) on its own connection.
 * The fsyncs of a checkpoint thus no longer stall ingest.
 *
 * PASSIVE checkpoints alone never let the WAL start again from its
 * beginning while the writer keeps committing: each copy ends behind the
 * newest frames, so the next commit appends again, and under sustained
 * ingest the WAL grew without bound: 345-630 MB for 1.6 M spans, and an
 * 8 GiB file system full at 6.4 M of 10 M; each frame was written into
 * new blocks the kernel first zeroes, and all of it is read back at the
 * next open.  So once a commit leaves CKPT_RESTART_PAGES
 * in the WAL, the writer waits in its WAL hook (after the commit, holding
 * no lock) while the thread copies what is left and runs a RESTART
 * checkpoint, which waits for readers to leave the WAL: the next commit
 * then writes from the WAL's start, over blocks the file already has.
 * A RESTART waits for readers at most CKPT_READER_WAIT_MS (the HTTP
 * API's queries take milliseconds); when one keeps the WAL longer, the
 * RESTART gives up and none is tried for CKPT_RETRY_S, so that a long
 * query (a `fay sql` over the whole store) costs the writer one short
 * wait every few seconds, not one a commit (which made ingest 3.7-6.5 times
 * slower); the WAL grows meanwhile.  The writer never waits more than
 * CKPT_RESTART_WAIT_S.  A WAL file that grew past 128 MiB (behind a long
 * reader) is cut back to that size by the first commit after the next
 * RESTART (SQLite's journal_size_limit), so the disk it took is given back
 * once the reader is gone.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "store/sqlite_int.h"

#define CKPT_PAGES 4096
#define CKPT_RESTART_PAGES (4 * CKPT_PAGES)   /* 64 MiB of 4 KiB pages */
#define CKPT_RESTART_WAIT_S 5
#define CKPT_READER_WAIT_MS 100
#define CKPT_RETRY_S 5

static void *ckpt_main(void *arg)
{
	struct ckpt *ck = arg;

	pthread_mutex_lock(&ck->lock);
	for (;;) {
		int restart, ok;

		while (!ck->pending && !ck->stop)
			pthread_cond_wait(&ck->wake, &ck->lock);
		if (ck->stop)
			break;
		restart = ck->restart;
		ck->pending = 0;
		pthread_mutex_unlock(&ck->lock);
		/* with restart the writer waits: this copies every frame left */
		if (sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
					      NULL, NULL) != SQLITE_OK)
			pr_debug("store: checkpoint: %s", sqlite3_errmsg(ck->db));
		ok = restart && sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_RESTART,
							  NULL, NULL) == SQLITE_OK;
		if (restart && !ok)
			pr_debug("store: restart checkpoint: %s", sqlite3_errmsg(ck->db));
		pthread_mutex_lock(&ck->lock);
		if (restart && !ok)
			ck->retry_ns = clock_monotonic_ns() + CKPT_RETRY_S * 1000000000ull;
		if (restart) {
			ck->restart = 0;
			pthread_cond_broadcast(&ck->restarted);
		}
	}
	ck->restart = 0;
	pthread_cond_broadcast(&ck->restarted);
	pthread_mutex_unlock(&ck->lock);
	return NULL;
}

/* sqlite3_wal_hook: called after each commit with the WAL's page count. */
static int ckpt_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct ckpt *ck = arg;
	struct timespec until;

	if (pages < CKPT_PAGES)
		return SQLITE_OK;
	pthread_mutex_lock(&ck->lock);
	ck->pending = 1;
	if (pages >= CKPT_RESTART_PAGES && !ck->stop && clock_monotonic_ns() >= ck->retry_ns)
		ck->restart = 1;
	pthread_cond_signal(&ck->wake);
	if (ck->restart) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += CKPT_RESTART_WAIT_S;
		while (ck->restart &&
		       pthread_cond_timedwait(&ck->restarted, &ck->lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&ck->lock);
	return SQLITE_OK;
}

void sq_ckpt_start(struct store_be *st)
{
	struct ckpt *ck = &st->ck;

	pthread_mutex_init(&ck->lock, NULL);
	pthread_cond_init(&ck->wake, NULL);
	pthread_cond_init(&ck->restarted, NULL);
	if (sqlite3_open_v2(st->path, &ck->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	sqlite3_busy_timeout(ck->db, 1000);
	/* Read once: before its first read a connection has not opened the
	 * WAL, and SQLite 3.40 (Debian 12) makes sqlite3_wal_checkpoint_v2()
	 * on such a connection a silent no-op; the WAL then grew forever. */
	if (sq_exec(ck->db, "SELECT count(*) FROM sqlite_master") != SQLITE_OK) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	/* from now on only RESTART waits: for readers (the writer is parked) */
	sqlite3_busy_timeout(ck->db, CKPT_READER_WAIT_MS);
	if (pthread_create(&ck->thread, NULL, ckpt_main, ck)) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	ck->running = 1;
	sq_exec(st->db, "PRAGMA wal_autocheckpoint = 0");
	/* 128 MiB: above the 64-93 MiB a WAL reaches between RESTARTs
	 * without a long reader, which must not be cut (and grown again
	 * into new blocks) every time */
	sq_exec(st->db, "PRAGMA journal_size_limit = 134217728");
	sqlite3_wal_hook(st->db, ckpt_hook, ck);
}

void sq_ckpt_stop(struct store_be *st)
{
	struct ckpt *ck = &st->ck;

	if (!ck->running)
		return;
	sqlite3_wal_hook(st->db, NULL, NULL);
	pthread_mutex_lock(&ck->lock);
	ck->stop = 1;
	pthread_cond_signal(&ck->wake);
	pthread_mutex_unlock(&ck->lock);
	pthread_join(ck->thread, NULL);
	sqlite3_close(ck->db);
	pthread_mutex_destroy(&ck->lock);
	pthread_cond_destroy(&ck->wake);
	pthread_cond_destroy(&ck->restarted);
	ck->running = 0;
}
