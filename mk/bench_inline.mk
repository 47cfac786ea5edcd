# SPDX-License-Identifier: MIT
# bench/bench_inline.c: what a function() probe adds per call, fay inline
# (patcher + in-process VM) vs kernel uprobe vs bpftrace vs uftrace
# (run as root: $(B)/bench/bench_inline).
BENCH_INLINE := $(B)/bench/bench_inline

$(BENCH_INLINE): bench/bench_inline.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_INLINE)
