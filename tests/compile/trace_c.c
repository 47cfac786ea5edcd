// SPDX-License-Identifier: MIT
/*
 * include/fay/trace.h as strict C11 (-std=c11 -pedantic), linked against
 * libfay.so.  Run by tests/unit/lib/test_linked.c: prints the traceparent
 * of a child span it recorded.
 */
#include <stdio.h>

#include <fay/trace.h>

int main(void)
{
	char tp[FAY_TRACEPARENT_LEN];
	struct fay_span *root, *child;

	if (fay_init("compile-c", "127.0.0.1", 1) != 0)
		return 1;
	fay_set_sampling(1);
	root = fay_span_root("c11");
	fay_span_tag(root, "lang", "c11");
	fay_span_tag_int(root, "std", 201112L);
	fay_span_event(root, "ev");
	child = fay_span_child(root, "child");
	if (fay_span_traceparent(child, tp, sizeof(tp)) != 55)
		return 2;
	fay_span_end(child);
	fay_span_end(root);
	printf("%s\n", tp);
	return 0;
}
