# SPDX-License-Identifier: MIT
# The eBPF back end's extras: probe providers and symbol resolution live in
# src/probe/ (outside the Makefile's component wildcard), so add their
# objects to the internal archive here.
PROBE_SRC := $(wildcard src/probe/*.c)
PROBE_OBJ := $(PROBE_SRC:%.c=$(B)/obj/%.o)
$(LIBINT): $(PROBE_OBJ)

# bench/bench_probe.c: a generated probe's per-event cost and set-up time,
# fay vs bpftrace (run as root: $(B)/bench/bench_probe).
BENCH_PROBE := $(B)/bench/bench_probe

$(BENCH_PROBE): bench/bench_probe.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_PROBE)
