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
 *
 * On a small file system these sizes shrink with it (#20): the WAL is
 * checkpointed once it holds 1/128 of the file system (at least 32 pages,
 * at most CKPT_PAGES), RESTARTed at four times that and cut back at eight
 * (16 MiB, 64 MiB and 128 MiB from 2 GiB up; 128 KiB, 512 KiB and 1 MiB
 * on 16 MiB), so that the WAL never needs more than a small part of the disk
 * to be copied into the database; sq_ckpt_wal_limit() is that RESTART
 * size, which the disk watermark (store/disk.c) keeps free.  And when the
 * disk runs low the watermark asks for a TRUNCATE checkpoint
 * (sq_ckpt_truncate()): every frame copied and the WAL file cut to zero
 * bytes, so that the space its frames held (many copies of the same
 * pages) goes back to the file system.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "store/backend.h"
#include "store/sqlite_int.h"

#define CKPT_PAGES 4096                 /* at most; 16 MiB of 4 KiB pages */
#define CKPT_PAGES_MIN 32
#define CKPT_FS_SHARE 128               /* ... and 1/128 of the file system */
#define CKPT_RESTART_X 4                /* RESTART at 4 x (64 MiB) */
#define CKPT_LIMIT_X 8                  /* journal_size_limit 8 x (128 MiB) */
#define CKPT_RESTART_WAIT_S 5
#define CKPT_READER_WAIT_MS 100
#define CKPT_RETRY_S 5

static void *ckpt_main(void *arg)
{
	struct ckpt *ck = arg;

	pthread_mutex_lock(&ck->lock);
	for (;;) {
		int restart, truncate, ok, nlog = 0, copied = 0;

		while (!ck->pending && !ck->stop)
			pthread_cond_wait(&ck->wake, &ck->lock);
		if (ck->stop)
			break;
		restart = ck->restart;
		truncate = ck->truncate;
		ck->pending = ck->truncate = 0;
		pthread_mutex_unlock(&ck->lock);
		/* with restart the writer waits: this copies every frame left */
		if (sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
					      &nlog, &copied) != SQLITE_OK)
			pr_debug("store: checkpoint: %s", sqlite3_errmsg(ck->db));
		else
			__atomic_store_n(&ck->copied, copied, __ATOMIC_RELAXED);
		ok = restart && sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_RESTART,
							  NULL, NULL) == SQLITE_OK;
		if (restart && !ok)
			pr_debug("store: restart checkpoint: %s", sqlite3_errmsg(ck->db));
		if (truncate) {
			int log = 0, done = 0;

			if (sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_TRUNCATE,
						      &log, &done) == SQLITE_OK &&
			    (__atomic_store_n(&ck->frames, 0, __ATOMIC_RELAXED), 1))
				pr_info("store: disk low: WAL checkpointed and truncated (%d pages "
					"copied)", done);
			else
				pr_info("store: disk low: truncating checkpoint: %s (tried again "
					"while the disk is low)", sqlite3_errmsg(ck->db));
		}
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

	__atomic_store_n(&ck->frames, pages, __ATOMIC_RELAXED);
	if (pages < ck->pages)
		return SQLITE_OK;
	pthread_mutex_lock(&ck->lock);
	ck->pending = 1;
	if (pages >= CKPT_RESTART_X * ck->pages && !ck->stop && clock_monotonic_ns() >= ck->retry_ns)
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

/* The checkpoint size in pages for st's file system (the top of this
 * file), and the page size. */
static void ckpt_size(struct store_be *st)
{
	struct ckpt *ck = &st->ck;
	sqlite3_stmt *s = NULL;
	struct statvfs fs;
	uint64_t pages = CKPT_PAGES;

	ck->page_size = 4096;
	if (sqlite3_prepare_v2(st->db, "PRAGMA page_size", -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0)
		ck->page_size = (unsigned)sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	if (!statvfs(st->path, &fs))
		pages = (uint64_t)fs.f_blocks * fs.f_frsize / CKPT_FS_SHARE / ck->page_size;
	if (pages > CKPT_PAGES)
		pages = CKPT_PAGES;
	if (pages < CKPT_PAGES_MIN)
		pages = CKPT_PAGES_MIN;
	ck->pages = (int)pages;
}

void sq_ckpt_start(struct store_be *st)
{
	struct ckpt *ck = &st->ck;
	char sql[96];

	ckpt_size(st);
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
	snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %llu",
		 (unsigned long long)CKPT_LIMIT_X * (unsigned)ck->pages * ck->page_size);
	sq_exec(st->db, sql);
	sqlite3_wal_hook(st->db, ckpt_hook, ck);
}

uint64_t sq_ckpt_wal_limit(const struct store_be *st)
{
	const struct ckpt *ck = &st->ck;

	if (!ck->pages)
		return (uint64_t)CKPT_RESTART_X * CKPT_PAGES * 4096;
	return (uint64_t)CKPT_RESTART_X * (unsigned)ck->pages * ck->page_size;
}

void sq_ckpt_truncate(struct store_be *st)
{
	struct ckpt *ck = &st->ck;

	if (!ck->running)
		return;
	pthread_mutex_lock(&ck->lock);
	ck->truncate = ck->pending = 1;
	pthread_cond_signal(&ck->wake);
	pthread_mutex_unlock(&ck->lock);
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

int sq__space(struct store_be *st, struct store_space *sp)
{
	char wal[4200];
	struct statvfs fs;
	struct stat sb;

	if (statvfs(st->path, &fs))
		return -errno;
	sp->total = (uint64_t)fs.f_blocks * fs.f_frsize;
	sp->avail = (uint64_t)fs.f_bavail * fs.f_frsize;
	snprintf(wal, sizeof(wal), "%s-wal", st->path);
	sp->wal = stat(wal, &sb) ? 0 : (uint64_t)sb.st_blocks * 512;
	if (st->ck.running) {
		/* what a checkpoint must still copy: the frames since the last
		 * one (a WAL begun again has fewer frames than were copied) */
		int frames = __atomic_load_n(&st->ck.frames, __ATOMIC_RELAXED);
		int copied = __atomic_load_n(&st->ck.copied, __ATOMIC_RELAXED);
		uint64_t left = (uint64_t)(frames >= copied ? frames - copied : frames) *
				st->ck.page_size;

		if (left < sp->wal)
			sp->wal = left;
	}
	sp->wal_limit = sq_ckpt_wal_limit(st);
	return 0;
}

void sq__disk_low(struct store_be *st)
{
	sq_ckpt_truncate(st);
}
