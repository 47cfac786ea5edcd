# SPDX-License-Identifier: MIT
# bench/bench_span.c: one span with libfay (linked as libfay.so, as
# applications link it) against the same information recorded as LTTng-UST
# tracepoints in BlkKin's event shapes.  bench/run-span.sh runs it inside an
# LTTng session and adds the callgrind instruction counts.

BENCH_SPAN       := $(B)/bench/bench_span
BENCH_SPAN_FAY   := $(B)/bench/bench_span_fay
BENCH_SPAN_LTTNG := $(shell pkg-config --libs lttng-ust 2>/dev/null || echo -llttng-ust) -ldl
BENCH_SPAN_LINK  := -L$(B) -lfay -Wl,-rpath,$(abspath $(B))

# The probes: LTTng-UST's macros, not our warning set.
$(B)/bench/bench_span_lttng.o: bench/bench_span_lttng.c bench/bench_span_lttng.h
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(OPT) -g -Ibench -c -o $@ $<

$(BENCH_SPAN): bench/bench_span.c bench/bench_span_lttng.h $(B)/bench/bench_span_lttng.o \
               $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Ibench $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(B)/bench/bench_span_lttng.o $(BENCH_SPAN_LINK) $(BENCH_SPAN_LTTNG)

# Without LTTng: for callgrind (valgrind and LTTng-UST's shm do not mix).
$(BENCH_SPAN_FAY): bench/bench_span.c $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -DBENCH_NO_LTTNG $(CFLAGS) $(LDFLAGS) -o $@ $< $(BENCH_SPAN_LINK)

.PHONY: bench-span
bench-span: $(BENCH_SPAN) $(BENCH_SPAN_FAY)
bench: bench-span
