// SPDX-License-Identifier: MIT
/*
 * libinline_lib.so: a library with a probed function, which inline_work
 * dlopen()s and dlclose()s while a query is attached (inline_robust.sh).
 */
__attribute__((noinline, noipa, used, visibility("default"))) long fay_lib_fn(long a, long b);
long fay_lib_fn(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a * 2 + b;
}
