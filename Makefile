# SPDX-License-Identifier: MIT
#
# fay: one non-recursive GNU Makefile.
#
#   make              build/fay, build/libfay.a, build/libfay.so (and its soname
#                     link libfay.so.0, what a program linked with -lfay loads)
#   make check        install deps, build, run every test; ends "N passed, N failed"
#   make demo         collector + agent + blockstack on SQLite, prints a trace
#   make bench        build the benchmarks in bench/ into build/bench/; each one's
#                     run command (root, peers, duration) heads its section of
#                     bench/RESULTS.md, with its figures
#   make SAN=1        build everything under ASan+UBSan into build/san/
#   make fuzz         libFuzzer targets (tests/fuzz/), each FUZZ_SECONDS (60)
#   make V=1          show full commands
#   make O=DIR        build into DIR instead of build/
#
# Sources are picked up by wildcard: a new .c file in a component directory
# is built without touching this file.  Component-specific extras (assets,
# benchmarks, examples) live in mk/*.mk.

SHELL := /bin/bash
.DEFAULT_GOAL := all

CC      ?= cc
# cc from make's builtin default is fine; honour CC=clang too.
PKGS    := libbpf libelf libdw zlib sqlite3 jansson capstone libprotobuf-c libnghttp2
# Headers only: fay dlopen()s these on first use (src/common/lazy_*.h), so
# that commands without HTTP do not pay for loading ~30 libraries.
LAZY_PKGS := libmicrohttpd libcurl gnutls
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(LAZY_PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT     ?= -O2
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wstrict-prototypes \
           -Wmissing-prototypes -Wshadow=local -Wformat=2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=gnu11 $(WARN) -D_GNU_SOURCE -fno-strict-aliasing -pthread
CPPFLAGS += -Iinclude -Isrc $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -liberty -lpthread -lm

# O=DIR puts the whole build tree elsewhere (build/ by default); several
# people working in one checkout each use their own.
O       ?= build
ifeq ($(FUZZ),1)
# make FUZZ=1: the whole tree again with clang, coverage for libFuzzer and
# ASan+UBSan, into build/fuzz/ (mk/fuzz.mk: make fuzz).  Warnings are
# gcc's business (-Werror there); clang's differ.
B       := $(O)/fuzz
CC      := clang
WARN    := -Wall -Wno-unused-parameter
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SAN),1)
B       := $(O)/san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else
B       := $(O)
endif

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# ---- sources ---------------------------------------------------------------

# libfay: what an instrumented application links.  Only the producer side of
# the ring and the span codec; nothing that needs a third-party library.
LIB_SRC := $(wildcard src/lib/*.c src/common/ring/producer.c) \
           src/common/spanrec.c src/common/clock.c src/common/rand.c \
           src/common/tsc.c
# Everything else that goes into the fay binary.
INT_SRC := $(filter-out $(LIB_SRC),$(wildcard src/common/*.c src/common/*/*.c)) \
           $(wildcard src/query/*.c src/bpf/*.c src/probe/*.c src/engine/*.c src/vm/*.c src/patch/*.c \
                      src/agent/*.c src/collector/*.c src/otlp/*.c src/cluster/*.c src/store/*.c) \
           $(filter-out src/cli/main.c,$(wildcard src/cli/*.c))
CLI_SRC := src/cli/main.c

LIB_OBJ := $(LIB_SRC:%.c=$(B)/pic/%.o)
INT_OBJ := $(INT_SRC:%.c=$(B)/obj/%.o) $(LIB_SRC:%.c=$(B)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/obj/%.o)

FAY     := $(B)/fay
LIBFAY_A  := $(B)/libfay.a
LIBFAY_SO := $(B)/libfay.so
# Internal archive: every object of the fay binary but main(); unit tests
# and benchmarks link it.
LIBINT  := $(B)/libfay-internal.a

LIBFAY_VERSION := 0.1.0
LIBFAY_MAP     := src/lib/libfay.map

# ---- rules -----------------------------------------------------------------

.PHONY: all check demo bench clean deps tests

all: $(FAY) $(LIBFAY_A) $(LIBFAY_SO) $(B)/libfay.so.0

$(B)/obj/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# libfay objects: PIC, hidden by default; FAY_API marks the exports.
$(B)/pic/%.o: %.c
	$(call msg,CC-PIC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -DFAY_BUILD_LIB \
		-MMD -MP -c $< -o $@

$(LIBFAY_A): $(LIB_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBFAY_SO): $(LIB_OBJ) $(LIBFAY_MAP)
	$(call msg,LD,$@)
	@grep -q "LIBFAY_$(LIBFAY_VERSION)" $(LIBFAY_MAP) || \
		{ echo "error: $(LIBFAY_MAP) has no node LIBFAY_$(LIBFAY_VERSION)" >&2; exit 1; }
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--version-script=$(LIBFAY_MAP) \
		-Wl,-soname,libfay.so.0 -o $@ $(LIB_OBJ) -lpthread

$(LIBINT): $(INT_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FAY): $(CLI_OBJ) $(LIBINT)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBINT) $(LDLIBS)

# ---- tests -----------------------------------------------------------------

# tests/unit/<component>/test_*.c: one program each, TAP output (tests/lib/test.h).
UNIT_SRC := $(wildcard tests/unit/*/test_*.c)
UNIT_BIN := $(UNIT_SRC:%.c=$(B)/%)

$(B)/tests/unit/%: tests/unit/%.c tests/lib/test.h $(LIBINT)
	$(call msg,TEST-CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Itests/lib $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

# C++ unit tests (what only C++ can exercise: exceptions through probes).
CXX      ?= c++
UNIT_CXX_SRC := $(wildcard tests/unit/*/test_*.cc)
UNIT_CXX_BIN := $(UNIT_CXX_SRC:%.cc=$(B)/%)
CXXFLAGS_T := $(OPT) -g -std=gnu++17 -Wall -Wextra -Werror -Wno-unused-parameter \
           -D_GNU_SOURCE -pthread $(filter -fsanitize=% -fno-omit-frame-pointer \
           -fno-sanitize-recover=%,$(CFLAGS))

$(B)/tests/unit/%: tests/unit/%.cc tests/lib/test.h $(LIBINT)
	$(call msg,TEST-CXX,$<)
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CPPFLAGS) -Itests/lib $(CXXFLAGS_T) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

tests: $(UNIT_BIN) $(UNIT_CXX_BIN)

# make check: deps, the normal build (for end-to-end tests, BPF and
# benchmarks), the sanitized build (unit tests), then the runner.
check:
	@scripts/install-deps
	@$(MAKE) --no-print-directory all examples
	@$(MAKE) --no-print-directory SAN=1 all tests
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-bins
	@FAY_BUILD=$(O) tests/run

deps:
	@scripts/install-deps

# Other mk/*.mk files add prerequisites to these.
examples:
bench:

demo:
	@scripts/install-deps
	@$(MAKE) --no-print-directory all examples
	@scripts/demo

clean:
	rm -rf $(O)

-include $(wildcard mk/*.mk)
-include $(shell find $(B) -name '*.d' 2>/dev/null)
