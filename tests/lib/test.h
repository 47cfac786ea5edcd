/* SPDX-License-Identifier: MIT */
/*
 * A tiny TAP harness for C unit tests (in the spirit of lttng-ust's tap.h
 * and redis's testhelp.h).  Each check prints "ok N - what" or
 * "not ok N - what" with the file and line; test_done() prints the plan and
 * returns the exit status.  tests/run adds up the lines of every test.
 */
#ifndef FAY_TEST_H
#define FAY_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_n, test_failed;

static inline void test_report(int pass, const char *file, int line, const char *what)
{
	test_n++;
	if (!pass)
		test_failed++;
	printf("%sok %d - %s\n", pass ? "" : "not ", test_n, what);
	if (!pass)
		printf("#   failed at %s:%d\n", file, line);
	fflush(stdout);
}

#define ok(cond, ...) do {						\
	char _what[512];						\
	snprintf(_what, sizeof(_what), __VA_ARGS__);			\
	test_report(!!(cond), __FILE__, __LINE__, _what);		\
} while (0)

#define is_int(got, want, ...) do {					\
	long long _g = (long long)(got), _w = (long long)(want);	\
	char _what[512];						\
	snprintf(_what, sizeof(_what), __VA_ARGS__);			\
	test_report(_g == _w, __FILE__, __LINE__, _what);		\
	if (_g != _w)							\
		printf("#   got %lld, want %lld\n", _g, _w);		\
} while (0)

#define is_u64(got, want, ...) do {					\
	uint64_t _g = (uint64_t)(got), _w = (uint64_t)(want);		\
	char _what[512];						\
	snprintf(_what, sizeof(_what), __VA_ARGS__);			\
	test_report(_g == _w, __FILE__, __LINE__, _what);		\
	if (_g != _w)							\
		printf("#   got %" PRIu64 ", want %" PRIu64 "\n", _g, _w);	\
} while (0)

#define is_str(got, want, ...) do {					\
	const char *_g = (got), *_w = (want);				\
	char _what[512];						\
	int _eq = _g && _w && !strcmp(_g, _w);				\
	snprintf(_what, sizeof(_what), __VA_ARGS__);			\
	test_report(_eq, __FILE__, __LINE__, _what);			\
	if (!_eq)							\
		printf("#   got \"%s\", want \"%s\"\n", _g ? _g : "(null)",	\
		       _w ? _w : "(null)");				\
} while (0)

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

/* The whole program cannot run here: say why and exit as skipped. */
#define skip_all(...) do {						\
	printf("1..0 # SKIP ");						\
	printf(__VA_ARGS__);						\
	printf("\n");							\
	exit(0);							\
} while (0)

static inline int test_done(void)
{
	printf("1..%d\n", test_n);
	return test_failed ? 1 : 0;
}

/* A repeatable pseudo-random sequence for tests (xorshift64). */
static uint64_t test_rng = 88172645463325252ull;

static inline uint64_t test_xorshift(void)
{
	test_rng ^= test_rng << 13;
	test_rng ^= test_rng >> 7;
	test_rng ^= test_rng << 17;
	return test_rng;
}

#endif
