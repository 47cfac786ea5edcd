# SPDX-License-Identifier: MIT
# fay collector + store extras.

# src/store/schema.c embeds schema.sql with .incbin: rebuild it when the
# schema changes (the compiler's -MMD cannot see that dependency).
$(B)/obj/src/store/schema.o: src/store/schema.sql

# The wire-protocol test client of tests/integration/collector_*.sh.
COLLECTOR_CLIENT := $(B)/tests/fay-wire-client

$(COLLECTOR_CLIENT): tests/integration/collector_client.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

all: $(COLLECTOR_CLIENT)
