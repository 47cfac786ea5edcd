# SPDX-License-Identifier: MIT
# The eBPF back end's extras (src/probe/ is in the Makefile's wildcard).
# bench/bench_probe.c: a generated probe's per-event cost and set-up time,
# fay vs bpftrace (run as root: $(B)/bench/bench_probe).
# bench/bench_inline.c: a function() probe per call, fay inline vs kernel
# uprobe vs bpftrace vs uftrace (root: $(B)/bench/bench_inline).
BENCH_PROBE := $(B)/bench/bench_probe $(B)/bench/bench_inline

$(BENCH_PROBE): $(B)/bench/%: bench/%.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_PROBE)
