// SPDX-License-Identifier: MIT
/* The TSC as a clock: detection and calibration pairs (tsc.h). */
#include <stdio.h>
#include <string.h>

#include "common/tsc.h"

#if defined(__x86_64__)
/* Does the file at path contain word (delimited by a blank, ':' or the
 * line's ends)? */
static bool file_has_word(const char *path, const char *word)
{
	char line[4096];
	size_t wl = strlen(word);
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		for (char *p = strstr(line, word); p; p = strstr(p + 1, word)) {
			char after = p[wl];

			if ((p == line || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':') &&
			    (after == ' ' || after == '\n' || after == '\t' || after == 0)) {
				found = true;
				break;
			}
		}
	}
	fclose(f);
	return found;
}

bool tsc_invariant(void)
{
	return file_has_word("/proc/cpuinfo", "constant_tsc") &&
	       file_has_word("/proc/cpuinfo", "nonstop_tsc");
}

bool tsc_kernel_clock(void)
{
	const char *cs = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

	return file_has_word(cs, "tsc") || file_has_word(cs, "kvm-clock");
}

uint64_t tsc_pair(clockid_t clk, unsigned tries, uint64_t good,
		  uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (unsigned i = 0; i < tries; i++) {
		struct timespec ts;
		uint64_t a = __rdtsc(), b;

		clock_gettime(clk, &ts);
		b = __rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
		if (best < good)
			break;
	}
	return best;
}
#else
bool tsc_invariant(void)
{
	return false;
}

bool tsc_kernel_clock(void)
{
	return false;
}

uint64_t tsc_pair(clockid_t clk, unsigned tries, uint64_t good,
		  uint64_t *tsc, uint64_t *ns)
{
	(void)clk; (void)tries; (void)good; (void)tsc; (void)ns;
	return UINT64_MAX;
}
#endif
