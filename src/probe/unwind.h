/* SPDX-License-Identifier: MIT */
/*
 * Unwind tables built from ELF call frame information (issue #27): the
 * rows of common/unwind_table.h for a file's .eh_frame (found through
 * .eh_frame_hdr, read with elfutils' libdw), and the table of a whole
 * process (its executable mappings, each file's rows with its bias) in a
 * sealed memfd for the inline runtime's stack walker.  Files' rows are
 * kept per (device, inode, size, mtime) for the life of fay.
 *
 * What is not read: .debug_frame (x86-64 code carries .eh_frame; a file
 * without .eh_frame_hdr, or with an encoding other than GNU ld's, gets
 * no rows and its frames are walked by frame pointers), the vDSO, and
 * anonymous executable memory (JIT code).
 */
#ifndef FAY_PROBE_UNWIND_H
#define FAY_PROBE_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/unwind_table.h"

/*
 * The rows of the ELF file open at fd (path for messages), in file
 * virtual addresses, sorted, the last one UNW_NONE; *rows stays owned by
 * the cache (valid until unwind_cache_free()).  0, or -errno with a
 * reason in why (-ENOENT: no .eh_frame_hdr; -ENOTSUP: an encoding
 * this reader does not know).
 */
int unwind_file_rows(int fd, const char *path, const struct unw_row **rows, size_t *n,
		     char *why, size_t whylen);

/*
 * A sealed read-only memfd holding the checked table of pid's
 * executable file mappings, read now from /proc/PID/maps (files opened
 * through /proc/PID/map_files: a process in another root too), but for
 * any whose path ends in skip (the runtime itself; NULL: none).  Files
 * without rows are left out (their frames are walked by frame pointers).
 * *nmods, *nrows: what it holds; *sig: unwind_process_sig() of the
 * mappings it read.  The descriptor (close-on-exec), or -errno with a
 * reason in why.
 */
int unwind_process_memfd(pid_t pid, const char *skip, unsigned *nmods, unsigned *nrows,
			 uint64_t *sig, char *why, size_t whylen);

/*
 * A hash of pid's executable file mappings (address range, offset,
 * path) but skip's, as unwind_process_memfd() reads them: another value
 * later means objects were loaded or unloaded since (dlopen) and a table
 * made now would differ.  Never 0, but 0 when the maps cannot be read.
 */
uint64_t unwind_process_sig(pid_t pid, const char *skip);

/* Free the files' rows kept so far. */
void unwind_cache_free(void);

#endif
