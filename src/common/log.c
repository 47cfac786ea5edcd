// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

static const char *const level_names[] = { "error", "warning", "info", "debug" };

static void default_print(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[2048];

	vsnprintf(line, sizeof(line), fmt, ap);
	size_t n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	fprintf(stderr, "%s: %s\n", level_names[lvl], line);
}

static log_print_fn print_fn = default_print;
static int level = -1;

log_print_fn log_set_print(log_print_fn fn)
{
	log_print_fn old = print_fn;

	print_fn = fn ? fn : default_print;
	return old;
}

int log_parse_level(const char *s)
{
	if (!strcasecmp(s, "debug"))
		return LOG_DEBUG;
	if (!strcasecmp(s, "info"))
		return LOG_INFO;
	if (!strcasecmp(s, "warn") || !strcasecmp(s, "warning"))
		return LOG_WARN;
	if (!strcasecmp(s, "error"))
		return LOG_ERROR;
	return -EINVAL;
}

enum log_level log_get_level(void)
{
	if (level < 0) {
		const char *env = getenv("FAY_LOG_LEVEL");
		int l = env ? log_parse_level(env) : -EINVAL;

		level = l >= 0 ? l : LOG_INFO;
	}
	return level;
}

void log_set_level(enum log_level lvl)
{
	level = lvl;
}

void log_printf(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	if ((int)lvl > (int)log_get_level())
		return;
	va_start(ap, fmt);
	print_fn(lvl, fmt, ap);
	va_end(ap);
}

const char *errstr(int err)
{
	return strerror(err < 0 ? -err : err);
}
