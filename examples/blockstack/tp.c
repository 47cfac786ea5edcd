// SPDX-License-Identifier: MIT
/*
 * blockstack: BlkKin ids in a W3C traceparent and back.
 *
 * BlkKin's ids are int64 and libfay's blkin layer keeps the sampling
 * decision in the trace id's sign bit (negative: not sampled).  On the
 * wire the trace id is the W3C 128-bit id with its upper half zero, and
 * the sampled flag is the sign bit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "blockstack.h"

#define SIGN_BIT (UINT64_C(1) << 63)

void bs_blkin_traceparent(const struct blkin_trace_info *info,
			  char tp[FAY_TRACEPARENT_LEN])
{
	uint64_t t = (uint64_t)info->trace_id;

	snprintf(tp, FAY_TRACEPARENT_LEN, "00-%016llx%016llx-%016llx-%02x",
		 0ull, (unsigned long long)(t & ~SIGN_BIT),
		 (unsigned long long)info->span_id, t & SIGN_BIT ? 0 : 1);
}

static int hex64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return -EINVAL;
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

int bs_traceparent_sampled(const char *tp)
{
	uint64_t flags;

	return strlen(tp) == 55 && !hex64(tp + 53, 2, &flags) && (flags & 1);
}

int bs_traceparent_blkin(const char *tp, struct blkin_trace_info *info)
{
	uint64_t hi, lo, span;

	if (strlen(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' ||
	    hex64(tp + 3, 16, &hi) || hex64(tp + 19, 16, &lo) ||
	    hex64(tp + 36, 16, &span) || !span || !lo)
		return -EINVAL;
	/* All 64 bits: a span id from libfay's own API may have the top bit
	 * set; libfay's blkin layer records the parent id bit for bit. */
	info->span_id = (int64_t)span;
	info->parent_span_id = 0;
	if (hi || (lo & SIGN_BIT)) {
		/* Not a BlkKin trace id: record nothing for it. */
		info->trace_id = (int64_t)(lo | SIGN_BIT);
		return -EINVAL;
	}
	info->trace_id = (int64_t)(bs_traceparent_sampled(tp) ? lo : lo | SIGN_BIT);
	return 0;
}
