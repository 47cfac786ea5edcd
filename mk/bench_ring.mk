# SPDX-License-Identifier: MIT
# The shm ring: its unit tests' shared header, and the drain benchmark.

# The ring tests include tests/unit/ring/ringtest.h: rebuild them when it changes.
$(filter $(B)/tests/unit/ring/%,$(UNIT_BIN)): tests/unit/ring/ringtest.h

# bench/bench_ring.c: ring drain rate vs memcpy, producer ns per ring_write.
BENCH_RING := $(B)/bench/bench_ring

$(BENCH_RING): bench/bench_ring.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_RING)
