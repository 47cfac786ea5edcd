# SPDX-License-Identifier: MIT
# fay query: the workload of tests/integration/query_*.sh and
# bench/bench_query.sh (functions called K times with known arguments,
# USDT sites, system calls), built into $(B)/tests/bin/query_work.
# Plain -O2 without sanitizers: the symbols must stay where the ELF says.

QUERY_WORK := $(B)/tests/bin/query_work

$(QUERY_WORK): tests/integration/query_tools/query_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $<

.PHONY: query-work
query-work: $(QUERY_WORK)
all: $(QUERY_WORK)
bench: $(QUERY_WORK)

# The stack keys' workload (tests/integration/query_stacks.sh): a known
# call tree, with frame pointers and without.
STACK_WORK := $(B)/tests/bin/stack_work_fp $(B)/tests/bin/stack_work_nofp
STACK_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Werror -fno-inline -fno-optimize-sibling-calls

$(B)/tests/bin/stack_work_fp: tests/integration/query_tools/stack_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(STACK_CFLAGS) -fno-omit-frame-pointer -o $@ $<

$(B)/tests/bin/stack_work_nofp: tests/integration/query_tools/stack_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(STACK_CFLAGS) -fomit-frame-pointer -o $@ $<

all: $(STACK_WORK)

# A libfay program (against libfay.so) whose two kinds of requests burn
# CPU 3:1, for trace_id / span_name of profile(...) samples.
SPAN_PROFILE := $(B)/tests/bin/span_profile
$(SPAN_PROFILE): tests/integration/query_tools/span_profile.c $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -Iinclude -o $@ $< \
		-L$(B) -l:libfay.so.0 -Wl,-rpath,$(abspath $(B))

all: $(SPAN_PROFILE)
