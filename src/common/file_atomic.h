/* SPDX-License-Identifier: MIT */
/*
 * Replacing a small file whole, so that a reader (or the next start after a
 * crash) sees the old content or the new one, never a mix: the one way every
 * fay component writes its state files (tokens, bindings, thresholds,
 * standing queries, the agent's id and cursors).
 */
#ifndef FAY_COMMON_FILE_ATOMIC_H
#define FAY_COMMON_FILE_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>

/* Skip both fsyncs: for a file rewritten often whose loss in a power cut
 * costs only work redone (the spool's read cursors between checkpoints). */
#define FILE_ATOMIC_NOSYNC 1u

/*
 * Replace path with the len bytes at buf, with permissions mode.
 * The bytes go to a new file beside path whose name is unpredictable and
 * created exclusively (mkostemp), so nothing planted in the directory (a
 * symlink to a file this process may write) can redirect the write; the
 * file is fsync'd, renamed over path (replacing path itself, never what a
 * link at path points to), and the directory is fsync'd so the rename
 * survives a crash; flags FILE_ATOMIC_NOSYNC leaves out both fsyncs.
 * On failure path is unchanged and the temporary file removed.
 * Returns 0 or -errno.
 */
int file_write_atomic(const char *path, const void *buf, size_t len, mode_t mode,
		      unsigned flags);

/* Write all len bytes of buf to fd (a short write is continued, EINTR
 * retried).  0 or -errno (-EIO: write() returned 0). */
int file_write_all(int fd, const void *buf, size_t len);

/* fsync the directory holding path ("." for a bare name), making a rename
 * or a creation in it durable.  0 or -errno. */
int fsync_dir_of(const char *path);

#endif
