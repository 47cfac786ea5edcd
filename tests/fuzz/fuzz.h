/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer targets in tests/fuzz/ (mk/fuzz.mk, scripts/fuzz).
 * Each target defines LLVMFuzzerTestOneInput(); a finding is a sanitizer
 * report, a crash, a hang, a leak or a failed FUZZ_CHECK (a property such
 * as decode(encode(decode(x))) == decode(x)).
 */
#ifndef FAY_TESTS_FUZZ_H
#define FAY_TESTS_FUZZ_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property that must hold: abort (a finding) with where and what. */
#define FUZZ_CHECK(cond, ...) do {						\
	if (!(cond)) {								\
		fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__);					\
		fputc('\n', stderr);						\
		abort();							\
	}									\
} while (0)

static inline void fuzz_no_log(enum log_level lvl, const char *fmt, va_list ap)
{
	(void)lvl;
	(void)fmt;
	(void)ap;
}

/* Quiet (FUZZ_VERBOSE=1: not): the code under test logs every bad input
 * it meets, and a log line per run buries the fuzzer's own. */
static inline void fuzz_quiet(void)
{
	if (!getenv("FUZZ_VERBOSE"))
		log_set_print(fuzz_no_log);
}

#endif
