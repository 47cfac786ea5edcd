# SPDX-License-Identifier: MIT
# bench/cluster_scale.c: a real collector under N simulated agents' query
# connections (the real protocol and partial states): merge delay,
# collector CPU and RSS, bytes per host per window.
BENCH_CLUSTER := $(B)/bench/cluster_scale

$(BENCH_CLUSTER): bench/cluster_scale.c bench/bench.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -I. $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_CLUSTER)
