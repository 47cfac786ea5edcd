/* SPDX-License-Identifier: MIT */
/*
 * Keeping a long-running process's heap from holding what it freed.
 * glibc gives each thread that meets contention an arena of its own (up to
 * 8 per CPU) and returns an arena's free memory to the system only when
 * it sits at the arena's top: a thread that once decoded a big batch or
 * built a big JSON answer keeps that high-water mark, free but resident,
 * for the life of the process (bench/RESULTS.md, "Soak": 50 of a
 * collector's 125 MiB of anonymous memory were free chunks in two thread
 * arenas).
 *
 *	heap_tune(4);                       at start, before threads
 *	heap_trim_maybe(now_ns);            after big batches, from any thread
 */
#ifndef FAY_COMMON_HEAP_H
#define FAY_COMMON_HEAP_H

#include <stdint.h>

/*
 * At most n malloc arenas (mallopt(M_ARENA_MAX)), and every allocation of
 * HEAP_MMAP_THRESHOLD or more a mapping of its own, unmapped when freed
 * (mallopt(M_MMAP_THRESHOLD); this also stops glibc from raising the
 * threshold to the size of each big block freed, after which 16 MiB frame
 * buffers came from the arenas and stayed resident: 300 MiB after 1,024
 * hostile connections had gone, bench/hostile_mem).  Either is left alone
 * when the environment sets MALLOC_ARENA_MAX or MALLOC_MMAP_THRESHOLD_
 * (the user's choice wins).
 */
#define HEAP_MMAP_THRESHOLD (1 << 20)
/*
 * And an arena's free top is given back by free() only past
 * HEAP_TRIM_THRESHOLD (mallopt(M_TRIM_THRESHOLD); MALLOC_TRIM_THRESHOLD_
 * overrides).  glibc's 128 KiB, fixed once M_MMAP_THRESHOLD is set, gave
 * a connection thread's pages back at the end of every request and took
 * them again, zeroed, on the next: the page faults, zeroing and TLB
 * shootdowns were ~3 us of an OTLP/JSON span's 13 (bench/RESULTS.md,
 * "OTLP: an arena's pages kept between requests").  What stays free is
 * given back by heap_trim_maybe().
 */
#define HEAP_TRIM_THRESHOLD (16 << 20)
void heap_tune(int n);

/* Every HEAP_TRIM_NS at most: give the free pages of every arena back to
 * the system (malloc_trim(0)); a call before that is a no-op.  Thread
 * safe; one caller trims at a time.  Returns 1 when it trimmed. */
#define HEAP_TRIM_NS (5ull * 1000000000u)
int heap_trim_maybe(uint64_t now_ns);

#endif
