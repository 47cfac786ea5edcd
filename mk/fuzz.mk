# SPDX-License-Identifier: MIT
# libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang, coverage,
# ASan and UBSan from a tree of their own (make FUZZ=1: build/fuzz/).
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="query wire"]
#        builds every target and runs each for FUZZ_SECONDS on a copy of
#        its seed corpus (tests/fuzz/corpus/NAME/, what it finds goes to
#        build/fuzz/corpus/NAME/; a crash leaves build/fuzz/crash-NAME-*)
#   make FUZZ=1 fuzz-bins      the targets only (make check does this;
#        tests/integration/fuzz_short.sh runs each a few seconds)
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz-bin/%)
FUZZ_SECONDS ?= 60

$(B)/fuzz-bin/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(LIBINT)
	$(call msg,FUZZ-LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Itests/fuzz $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) \
		-o $@ $< $(LIBINT) $(LDLIBS)

.PHONY: fuzz fuzz-bins
fuzz-bins: $(FUZZ_BIN)

fuzz:
	@scripts/install-deps
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-bins
	@FAY_BUILD=$(O) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz $(FUZZ_TARGETS)
