# SPDX-License-Identifier: MIT
# tests/compile: the public headers build as strict C11 and C++, and
# programs written against them (one in ceph/blkin's style, including
# <zipkin_c.h>) link against libfay.so unchanged.  Built with `make tests`
# and `make examples`; tests/unit/lib/test_linked.c runs the programs.

CXX         ?= g++
COMPILE_DIR := $(B)/tests/compile
COMPILE_STRICT := -Wall -Wextra -Werror -pedantic
COMPILE_LINK := -L$(B) -lfay -Wl,-rpath,$(abspath $(B))
COMPILE_HDRS := include/fay/trace.h include/fay/blkin.h include/fay/zipkin_c.h
COMPILE_OUT := $(COMPILE_DIR)/trace_c $(COMPILE_DIR)/trace_cc \
               $(COMPILE_DIR)/blkin_prog $(COMPILE_DIR)/blkin_events \
               $(COMPILE_DIR)/blkin_c.o

# libfay.so's soname is libfay.so.0: what a linked program asks for.
$(B)/libfay.so.0: $(LIBFAY_SO)
	$(Q)ln -sf libfay.so $@

$(COMPILE_DIR)/trace_c: tests/compile/trace_c.c $(COMPILE_HDRS) $(B)/libfay.so.0
	$(call msg,C11,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) -std=c11 $(COMPILE_STRICT) -Iinclude $(LDFLAGS) -o $@ $< $(COMPILE_LINK)

$(COMPILE_DIR)/trace_cc: tests/compile/trace_cc.cc $(COMPILE_HDRS) $(B)/libfay.so.0
	$(call msg,C++11,$<)
	@mkdir -p $(@D)
	$(Q)$(CXX) -std=c++11 $(COMPILE_STRICT) -Iinclude $(LDFLAGS) -o $@ $< $(COMPILE_LINK)

$(COMPILE_DIR)/blkin_c.o: tests/compile/blkin_c.c $(COMPILE_HDRS)
	$(call msg,C11,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) -std=c11 $(COMPILE_STRICT) -Iinclude -Iinclude/fay -c -o $@ $<

# The BlkKin program: its own include path and ordinary warnings, as a
# project that used ceph/blkin would build it.
$(COMPILE_DIR)/blkin_prog $(COMPILE_DIR)/blkin_events: $(COMPILE_DIR)/%: tests/compile/%.c \
		$(COMPILE_HDRS) $(B)/libfay.so.0
	$(call msg,BLKIN,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) -Wall -Wextra -Werror -Iinclude/fay $(LDFLAGS) -o $@ $< $(COMPILE_LINK)

.PHONY: compile-check
compile-check: $(COMPILE_OUT)
tests: compile-check
examples: compile-check
