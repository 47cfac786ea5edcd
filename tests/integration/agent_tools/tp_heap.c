// SPDX-License-Identifier: MIT
/*
 * The workload of tests/integration/libfay_memcheck.sh: libfay reading
 * traceparent headers from heap buffers of exactly their size (the NUL
 * the buffer's last byte), at every offset 0-15 from malloc's alignment
 * and every length 0-72 (prefixes and extensions of a good header), and
 * writing them back, with sampled spans recorded.  Run under Valgrind's
 * memcheck, which reports any read past such a buffer.  Prints
 * "accepted N refused M" and exits 0 when each header got the answer
 * its length calls for (55 characters, or more for a later version).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fay/trace.h>

int main(void)
{
	static const char good[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	unsigned accepted = 0, refused = 0, wrong = 0;

	if (fay_init("tp_heap", "127.0.0.1", 1)) {
		fprintf(stderr, "tp_heap: fay_init failed\n");
		return 1;
	}
	for (unsigned ver = 0; ver < 2; ver++) {
		for (unsigned len = 0; len <= 72; len++) {
			for (unsigned off = 0; off < 16; off++) {
				char *buf = malloc(off + len + 1), *s = buf + off;
				char tp[FAY_TRACEPARENT_LEN];
				struct fay_span *sp;
				int want;

				if (!buf)
					return 1;
				for (unsigned i = 0; i < len; i++)
					s[i] = i < 55 ? good[i] : "-x"[(i - 55) & 1];
				if (len > 1)
					s[1] = ver ? '1' : '0';
				s[len] = '\0';
				want = len == 55 || (ver && len > 55);
				sp = fay_span_remote(s, "heap");
				fay_span_event(sp, "read");
				if (fay_span_traceparent(sp, tp, sizeof(tp)) != 55)
					wrong++;
				else if ((memcmp(tp + 3, good + 3, 32) == 0) != want)
					wrong++;        /* the trace continued iff accepted */
				else if (want)
					accepted++;
				else
					refused++;
				fay_span_end(sp);
				free(buf);
			}
		}
	}
	printf("accepted %u refused %u wrong %u\n", accepted, refused, wrong);
	return wrong ? 1 : 0;
}
