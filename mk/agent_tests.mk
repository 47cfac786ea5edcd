# SPDX-License-Identifier: MIT
# fay agent: the test tools of tests/integration/agent_*.sh, built into
# $(B)/tests/bin/: a traced process (libfay, static) and a minimal
# collector speaking the wire protocol.

AGENT_TEST_BIN := $(B)/tests/bin/span_producer $(B)/tests/bin/fake_collector

$(B)/tests/bin/span_producer: tests/integration/agent_tools/span_producer.c $(LIBFAY_A)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFAY_A) -lpthread

$(B)/tests/bin/fake_collector: tests/integration/agent_tools/fake_collector.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

.PHONY: agent-tests
agent-tests: $(AGENT_TEST_BIN)
all: $(AGENT_TEST_BIN)

# The fixed workload of tests/integration/span_golden.sh, linked with
# libfay.so.0 (RUNPATH: LD_LIBRARY_PATH can swap in another build).
$(B)/tests/bin/span_golden: tests/integration/agent_tools/span_golden.c $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(B) -lfay \
		-Wl,-rpath,$(abspath $(B)) -Wl,--enable-new-dtags -lpthread
all: $(B)/tests/bin/span_golden
agent-tests: $(B)/tests/bin/span_golden

# The workload of tests/integration/flight_capture.sh (the flight recorder).
$(B)/tests/bin/flight_workload: tests/integration/agent_tools/flight_workload.c $(LIBFAY_A)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFAY_A) -lpthread
all: $(B)/tests/bin/flight_workload
agent-tests: $(B)/tests/bin/flight_workload

# The cross-host workload of tests/integration/flight_rule_netns.sh
# (capture rules).
$(B)/tests/bin/flight_hop: tests/integration/agent_tools/flight_hop.c $(LIBFAY_A)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFAY_A) -lpthread
all: $(B)/tests/bin/flight_hop
agent-tests: $(B)/tests/bin/flight_hop

# The heap-buffer traceparent workload of
# tests/integration/libfay_memcheck.sh (run under Valgrind's memcheck).
$(B)/tests/bin/tp_heap: tests/integration/agent_tools/tp_heap.c $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(B) -lfay \
		-Wl,-rpath,$(abspath $(B)) -Wl,--enable-new-dtags
all: $(B)/tests/bin/tp_heap
agent-tests: $(B)/tests/bin/tp_heap
