# SPDX-License-Identifier: MIT
# bench/bench_otlp.c: OTLP ingest, protobuf vs JSON on the same spans in
# one run (decode + map in process; with --fay, POST /v1/traces into a
# running collector).  From the top of the tree:
#   $(B)/bench/bench_otlp -s 100 -r 5 --fay $(B)/fay
BENCH_OTLP := $(B)/bench/bench_otlp

$(BENCH_OTLP): bench/bench_otlp.c bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_OTLP)
