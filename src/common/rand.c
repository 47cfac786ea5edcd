// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/rand.h"

struct rand_state {
	uint64_t s[4];
	pid_t pid; /* 0 = not seeded (new thread, or child after fork) */
};

static __thread struct rand_state st;

int rand_bytes(void *buf, unsigned long len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (unsigned long)n;
	}
	return 0;
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static __attribute__((noinline)) void rand_seed(void)
{
	if (rand_bytes(st.s, sizeof(st.s)) < 0) {
		/* No getrandom (seccomp?): mix what we have. */
		struct timespec ts;
		uint64_t x;

		clock_gettime(CLOCK_REALTIME, &ts);
		x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)(uintptr_t)&st ^ (uint64_t)pthread_self();
		for (int i = 0; i < 4; i++)
			st.s[i] = splitmix(&x);
	}
	if (!(st.s[0] | st.s[1] | st.s[2] | st.s[3]))
		st.s[0] = 1;
	st.pid = getpid();
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rand_u64(void)
{
	uint64_t r, t;

	/* st.pid doubles as the "seeded" flag; rand_atfork_child clears
	 * it, so no getpid() syscall is needed here. */
	if (__builtin_expect(!st.pid, 0))
		rand_seed();
	do {
		r = rotl(st.s[1] * 5, 7) * 9;
		t = st.s[1] << 17;
		st.s[2] ^= st.s[0];
		st.s[3] ^= st.s[1];
		st.s[1] ^= st.s[2];
		st.s[0] ^= st.s[3];
		st.s[2] ^= t;
		st.s[3] = rotl(st.s[3], 45);
	} while (__builtin_expect(!r, 0));
	return r;
}

/* After fork, the child's copy of the forking thread's state must be
 * reseeded, or parent and child would emit the same ids. */
static void rand_atfork_child(void)
{
	st.pid = 0;
}

__attribute__((constructor)) static void rand_init(void)
{
	pthread_atfork(NULL, NULL, rand_atfork_child);
}
