/* SPDX-License-Identifier: MIT */
/*
 * Memory-ordering helpers for lock-free structures shared between threads
 * and processes (the shm rings).  Named after the kernel's and libbpf's
 * smp_load_acquire/smp_store_release so the ordering argument in
 * src/common/ring/README.md reads the same as the code.
 */
#ifndef FAY_COMMON_ATOMIC_H
#define FAY_COMMON_ATOMIC_H

#define READ_ONCE(x)          __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v)      __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define smp_load_acquire(p)   __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define smp_rmb()             __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define smp_wmb()             __atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_mb()              __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define atomic_add(p, v)      __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define atomic_cas(p, expp, v) \
	__atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, \
				    __ATOMIC_ACQUIRE)

#endif
