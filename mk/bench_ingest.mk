# SPDX-License-Identifier: MIT
# bench/bench_ingest.c: spans/s into SQLite through the collector's store
# path vs bare SQLite, and over the wire.  Run from the top of the tree:
#   $(B)/bench/bench_ingest --fay $(B)/fay --client $(B)/tests/fay-wire-client
BENCH_INGEST := $(B)/bench/bench_ingest

$(BENCH_INGEST): bench/bench_ingest.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_INGEST)

# bench/bench_store.c: SQLite vs ClickHouse through store.h, same run
# (bench/store.sh starts a ClickHouse server for it).
BENCH_STORE := $(B)/bench/bench_store

$(BENCH_STORE): bench/bench_store.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_STORE)
