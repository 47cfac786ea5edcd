/* SPDX-License-Identifier: MIT */
/*
 * Logging.  Libraries never print on their own: they call the print
 * callback the application installs with log_set_print().  The default
 * callback writes one line to stderr, prefixed "error:", "warning:" ...
 * FAY_LOG_LEVEL=debug|info|warn|error sets the level.
 */
#ifndef FAY_COMMON_LOG_H
#define FAY_COMMON_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

typedef void (*log_print_fn)(enum log_level lvl, const char *fmt, va_list ap);

/* Install fn (NULL restores the default); returns the previous callback. */
log_print_fn log_set_print(log_print_fn fn);
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Parse "debug", "info", "warn", "error"; returns -EINVAL otherwise. */
int log_parse_level(const char *s);

__attribute__((format(printf, 2, 3)))
void log_printf(enum log_level lvl, const char *fmt, ...);

#define pr_err(...)   log_printf(LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)  log_printf(LOG_WARN, __VA_ARGS__)
#define pr_info(...)  log_printf(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_printf(LOG_DEBUG, __VA_ARGS__)

/* strerror() of a negative or positive errno value. */
const char *errstr(int err);

#endif
