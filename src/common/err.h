/* SPDX-License-Identifier: MIT */
/*
 * Error conventions (libbpf's): functions returning int return >= 0 on
 * success and -errno on failure; constructors return NULL and set errno.
 */
#ifndef FAY_COMMON_ERR_H
#define FAY_COMMON_ERR_H

#include <errno.h>
#include <stddef.h>

/* Set errno from a negative return and pass the value through. */
static inline int fay_err(int ret)
{
	if (ret < 0)
		errno = -ret;
	return ret;
}

/* For constructors: set errno to -err and return NULL. */
static inline void *fay_err_ptr(int err)
{
	errno = err < 0 ? -err : err;
	return NULL;
}

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#endif
