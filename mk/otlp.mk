# SPDX-License-Identifier: MIT
# The OTLP receiver's protobuf code: protoc-c (Debian's protobuf-c-compiler)
# generates C from fay's own subset of opentelemetry-proto
# (src/collector/proto/*.proto) into $(B)/gen/otlp at build time; nothing
# generated is committed.  Only src/collector/otlp_pb.c includes the
# generated headers (and so protobuf-c's); the generated objects join
# libfay-internal.a.

OTLP_PROTO  := $(wildcard src/collector/proto/*.proto)
OTLP_GENDIR := $(B)/gen/otlp
OTLP_GEN_C  := $(patsubst src/collector/proto/%.proto,$(OTLP_GENDIR)/%.pb-c.c,$(OTLP_PROTO))
OTLP_GEN_H  := $(OTLP_GEN_C:.c=.h)
OTLP_GEN_O  := $(patsubst $(B)/gen/%.c,$(B)/obj/gen/%.o,$(OTLP_GEN_C))
OTLP_STAMP  := $(OTLP_GENDIR)/.stamp

# One protoc-c run makes every file (the .proto files import each other).
$(OTLP_STAMP): $(OTLP_PROTO) mk/otlp.mk
	$(call msg,PROTOC-C,$(OTLP_GENDIR))
	@mkdir -p $(OTLP_GENDIR)
	$(Q)command -v protoc-c >/dev/null || { echo "error: protoc-c not found: run scripts/install-deps (protobuf-c-compiler)" >&2; exit 1; }
	$(Q)protoc-c -Isrc/collector/proto --c_out=$(OTLP_GENDIR) $(OTLP_PROTO)
	@touch $@

$(OTLP_GEN_C) $(OTLP_GEN_H): $(OTLP_STAMP)

# Generated code: built with the project's flags minus its warnings.
$(B)/obj/gen/otlp/%.o: $(OTLP_GENDIR)/%.c $(OTLP_STAMP)
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -I$(OTLP_GENDIR) $(filter-out -W% -Werror,$(CFLAGS)) -w -c $< -o $@

$(B)/obj/src/collector/otlp_pb.o: CPPFLAGS += -I$(OTLP_GENDIR)
$(B)/obj/src/collector/otlp_pb.o: $(OTLP_STAMP)

$(LIBINT): $(OTLP_GEN_O)

# The OTLP tests' npm dev dependencies (tests/otlp: OpenTelemetry's JS SDK
# and exporters), installed from the lockfile like ui/'s; without the
# registry the OTLP client tests skip.
OTLP_NPM := tests/otlp/node_modules/.package-lock.json

$(OTLP_NPM): tests/otlp/package.json tests/otlp/package-lock.json
	$(call msg,NPM-CI,tests/otlp/node_modules)
	$(Q)cd tests/otlp && if command -v npm >/dev/null 2>&1; then \
		flock .npm-ci.lock npm ci --no-audit --no-fund --loglevel=error >/dev/null || \
		echo "warning: npm ci failed in tests/otlp: the OTLP client tests will skip" >&2; \
	else echo "warning: npm not found (scripts/install-deps): the OTLP client tests will skip" >&2; fi
	$(Q)[ ! -d tests/otlp/node_modules ] || touch $@

tests: | $(OTLP_NPM)
