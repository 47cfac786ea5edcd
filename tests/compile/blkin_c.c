// SPDX-License-Identifier: MIT
/* include/fay/blkin.h (and zipkin_c.h) compile as strict C11 on their own. */
#include <zipkin_c.h>
#include <fay/blkin.h>

struct blkin_trace_info_packed packed_on_the_wire;

int blkin_c_check(struct blkin_trace *t, const struct blkin_endpoint *ep);

int blkin_c_check(struct blkin_trace *t, const struct blkin_endpoint *ep)
{
	struct blkin_annotation a;

	a.val_int = 1;          /* the anonymous union, as BlkKin has it */
	BLKIN_KEYVAL_INTEGER(t, ep, "k", a.val_int)
	return blkin_init_string_annotation(&a, "k", "v", ep);
}
