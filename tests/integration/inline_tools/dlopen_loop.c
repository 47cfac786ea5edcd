// SPDX-License-Identifier: MIT
/*
 * dlopen_loop LIB ROUNDS CALLS [GO]: ROUNDS times dlopen(LIB), call its
 * fay_lib_fn() CALLS times, dlclose(LIB) (which unmaps it: the library
 * is not NODELETE), then print the sum of the results: what the probed
 * function computed, the same with and without a probe.  With GO, wait
 * (polling, up to 30 s) until the file GO exists before the first round
 * (a query attaches with -p meanwhile).  inline_dlopen.sh (issue 19).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long rounds, calls, sum = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: dlopen_loop LIB ROUNDS CALLS [GO]\n");
		return 2;
	}
	rounds = atol(argv[2]);
	calls = atol(argv[3]);
	for (int w = 0; argc > 4 && access(argv[4], F_OK) && w < 3000; w++)
		usleep(10000);
	for (long r = 0; r < rounds; r++) {
		void *h = dlopen(argv[1], RTLD_NOW);
		long (*fn)(long, long);

		if (!h) {
			fprintf(stderr, "dlopen_loop: %s\n", dlerror());
			return 1;
		}
		fn = (long (*)(long, long))dlsym(h, "fay_lib_fn");
		if (!fn) {
			fprintf(stderr, "dlopen_loop: %s\n", dlerror());
			return 1;
		}
		for (long i = 0; i < calls; i++)
			sum += fn(r, i);
		if (dlclose(h)) {
			fprintf(stderr, "dlopen_loop: %s\n", dlerror());
			return 1;
		}
		if (argc > 4)
			usleep(2000);	/* a process attached to: not a busy loop */
	}
	printf("%ld\n", sum);
	return 0;
}
