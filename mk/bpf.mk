# SPDX-License-Identifier: MIT
# The eBPF back end's extras: probe providers and symbol resolution live in
# src/probe/ (outside the Makefile's component wildcard), so add their
# objects to the internal archive here.
PROBE_SRC := $(wildcard src/probe/*.c)
PROBE_OBJ := $(PROBE_SRC:%.c=$(B)/obj/%.o)
$(LIBINT): $(PROBE_OBJ)
