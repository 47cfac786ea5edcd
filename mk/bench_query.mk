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
