// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

int clock_parse_duration(const char *s, uint64_t *ns)
{
	static const struct { const char *sfx; uint64_t mul; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 },
		{ "s", 1000000000ull }, { "m", 60000000000ull },
		{ "h", 3600000000000ull }, { "d", 86400000000000ull },
	};
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (!*end) {
		*ns = v * 1000000000ull;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(end, units[i].sfx)) {
			if (v > UINT64_MAX / units[i].mul)
				return -ERANGE;
			*ns = v * units[i].mul;
			return 0;
		}
	}
	return -EINVAL;
}
