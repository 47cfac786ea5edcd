# SPDX-License-Identifier: MIT
# Protocol Buffers, for every component: each src/**/*.proto is turned into
# C by protoc-c (Debian's protobuf-c-compiler) at build time, into the
# build tree: $(B)/gen/<its directory>/<name>.pb-c.{c,h}, one protoc-c run
# per directory with that directory as the import root (its .proto files
# may import each other by file name).  Nothing generated is committed.
# The generated objects join libfay-internal.a and link -lprotobuf-c
# (PKGS); every gen directory is on the include path, and objects are
# built after the generation, but by the house rule only the one file
# that wraps a .proto's messages includes "<name>.pb-c.h" (and with it
# <protobuf-c/protobuf-c.h>).  Add a .proto anywhere under src/: nothing
# here changes.

PROTO_SRC    := $(shell find src -name '*.proto' 2>/dev/null | sort)
PROTO_DIRS   := $(sort $(dir $(PROTO_SRC)))
PROTO_GEN_C  := $(PROTO_SRC:%.proto=$(B)/gen/%.pb-c.c)
PROTO_GEN_O  := $(PROTO_GEN_C:$(B)/gen/%.c=$(B)/obj/gen/%.o)
PROTO_STAMPS := $(PROTO_DIRS:%=$(B)/gen/%.stamp)

CPPFLAGS += $(PROTO_DIRS:%=-I$(B)/gen/%)

# proto_in DIR/: the .proto files directly in DIR (not in its subdirectories,
# which have their own run and import root).
proto_in = $(foreach f,$(PROTO_SRC),$(if $(filter $(1),$(dir $(f))),$(f)))

# proto_dir DIR/: generate every .proto of DIR in one protoc-c run.
define proto_dir
$(B)/gen/$(1).stamp: $(call proto_in,$(1)) mk/proto.mk
	$$(call msg,PROTOC-C,$(1))
	@mkdir -p $(B)/gen/$(1)
	$(Q)command -v protoc-c >/dev/null || { echo "error: protoc-c not found: run scripts/install-deps (protobuf-c-compiler)" >&2; exit 1; }
	$(Q)protoc-c -I$(1) --c_out=$(B)/gen/$(1) $(call proto_in,$(1))
	@touch $$@

$(patsubst %.proto,$(B)/gen/%.pb-c.c,$(call proto_in,$(1))) \
$(patsubst %.proto,$(B)/gen/%.pb-c.h,$(call proto_in,$(1))): $(B)/gen/$(1).stamp
endef
$(foreach d,$(PROTO_DIRS),$(eval $(call proto_dir,$(d))))

# Generated code: the project's flags without its warnings.
$(B)/obj/gen/%.o: $(B)/gen/%.c
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -I$(dir $<) $(filter-out -W% -Werror,$(CFLAGS)) -w -c $< -o $@

# Every object may include a generated header: generate first.
$(INT_OBJ) $(CLI_OBJ): | $(PROTO_STAMPS)
$(LIBINT): $(PROTO_GEN_O)
