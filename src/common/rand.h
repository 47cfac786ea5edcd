/* SPDX-License-Identifier: MIT */
/*
 * Fast per-thread random numbers for trace and span ids: xoshiro256**
 * seeded from getrandom(2) once per thread (and again after fork), so the
 * hot path makes no syscall.
 */
#ifndef FAY_COMMON_RAND_H
#define FAY_COMMON_RAND_H

#include <stdint.h>

/* A uniformly distributed 64-bit value, never 0. */
uint64_t rand_u64(void);

/* Fill buf with len bytes straight from getrandom(2).  Returns 0 or -errno. */
int rand_bytes(void *buf, unsigned long len);

#endif
