// SPDX-License-Identifier: MIT
/*
 * blockstack: a known CPU cost per layer (BLOCKSTACK_CPU_US), so a CPU
 * profile of the stack can be checked against what each layer was told
 * to burn (tests/e2e/blockstack_profile.sh).
 *
 *   BLOCKSTACK_CPU_US="composer=1000,blocker-1=2000,blocker-2=3000"
 *
 * Each named role spins that many microseconds of its own thread's CPU
 * time per request it serves, inside the span it opens for the request
 * (composer, blocker-N: libfay spans "write"/"read"; mapper: its BlkKin
 * "map", between sr and ss; vm-client: between cs and cr).  Unnamed
 * roles burn nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockstack.h"

int bs_cpu_us(const char *role, unsigned *us)
{
	const char *spec = getenv("BLOCKSTACK_CPU_US"), *p;
	size_t rl = role ? strlen(role) : 0;

	*us = 0;
	if (!spec || !*spec)
		return 0;
	for (p = spec; *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		char *num_end;
		unsigned long v;

		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p)
			goto bad;
		errno = 0;
		v = strtoul(eq + 1, &num_end, 10);
		if (errno || num_end != end || num_end == eq + 1 || eq[1] == '-' ||
		    v > 10u * 1000 * 1000)
			goto bad;
		if (role && (size_t)(eq - p) == rl && !strncmp(p, role, rl))
			*us = (unsigned)v;
		p = *end ? end + 1 : end;
		continue;
bad:
		fprintf(stderr, "blockstack: BLOCKSTACK_CPU_US='%s': bad entry at '%.*s' "
			"(want ROLE=MICROSECONDS[,...], at most 10000000 each)\n",
			spec, (int)(end - p), p);
		return -EINVAL;
	}
	return 0;
}

static unsigned long long thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

void bs_burn(unsigned us)
{
	unsigned long long until;
	volatile uint64_t x = 1;

	if (!us)
		return;
	until = thread_cpu_ns() + (unsigned long long)us * 1000u;
	while (thread_cpu_ns() < until)
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
}
