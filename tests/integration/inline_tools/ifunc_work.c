// SPDX-License-Identifier: MIT
/*
 * ifunc_work N [GO]: N rounds of one call each of strlen, memcpy, memset
 * and strcmp (glibc IFUNCs; built -fno-builtin so each is a real call),
 * then print what they computed.  With GO, wait (polling, up to 30 s)
 * until the file GO exists first (a query attaches meanwhile).
 * inline_ifunc.sh (issue 19 item 4).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char a[64] = "hello, ifunc world, and more", b[64];
	long n = argc > 1 ? atol(argv[1]) : 0, sum = 0;

	for (int w = 0; argc > 2 && access(argv[2], F_OK) && w < 3000; w++)
		usleep(10000);
	for (long i = 0; i < n; i++) {
		sum += (long)strlen(a + i % 7);
		memcpy(b, a, 23);
		memset(b + 23, 'a' + (int)(i % 26), 11);
		b[34] = '\0';
		sum += strcmp(a, b) > 0;
		sum += b[30];
	}
	printf("%ld\n", sum);
	return 0;
}
