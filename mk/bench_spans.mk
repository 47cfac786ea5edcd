# SPDX-License-Identifier: MIT
# bench/bench_spans.c: ns per drained span of a spans(...) query (the
# agent's VM) vs hand-written C for the same question.
BENCH_SPANS := $(B)/bench/bench_spans

$(BENCH_SPANS): bench/bench_spans.c bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_SPANS)
