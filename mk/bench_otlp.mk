# SPDX-License-Identifier: MIT
# bench/bench_otlp.c: OTLP ingest, protobuf vs JSON vs gRPC on the same
# spans in one run (decode + map in process; with --fay, OTLP/HTTP and
# OTLP/gRPC into a running collector, 1 and 4 connections, requests of
# 100 and 512 spans; bench/otlp_h2.c is its gRPC client).  From the top
# of the tree:
#   $(B)/bench/bench_otlp -r 5 -t 0.5 --fay $(B)/fay
BENCH_OTLP := $(B)/bench/bench_otlp

$(BENCH_OTLP): bench/bench_otlp.c bench/otlp_h2.c bench/otlp_h2.h bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ bench/bench_otlp.c bench/otlp_h2.c \
		$(LIBINT) $(LDLIBS)

bench: $(BENCH_OTLP)

# bench/bench_zjson.c: Zipkin v2 JSON read into spans, the streaming
# reader against the jansson tree reader it replaced (tests/fuzz/zjson_tree.c).
#   $(B)/bench/bench_zjson -s 512 -r 5 -t 0.5
BENCH_ZJSON := $(B)/bench/bench_zjson

$(BENCH_ZJSON): bench/bench_zjson.c tests/fuzz/zjson_tree.c bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ bench/bench_zjson.c $(LIBINT) $(LDLIBS)

bench: $(BENCH_ZJSON)

# bench/bench_export.c: --export's OTLP encoding from the span model
# against the path through Zipkin JSON it replaced
# (tests/unit/otlp/otlp_export_ref.h), same spans, same run.
#   $(B)/bench/bench_export -s 500 -r 5 -t 0.5
BENCH_EXPORT := $(B)/bench/bench_export

$(BENCH_EXPORT): bench/bench_export.c tests/unit/otlp/otlp_export_ref.h bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ bench/bench_export.c $(LIBINT) $(LDLIBS)

bench: $(BENCH_EXPORT)
