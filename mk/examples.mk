# SPDX-License-Identifier: MIT
# Examples: programs that use libfay the way an application would, linked
# with the static library (they must not need libfay.so at run time).
#
#   $(B)/blockstack   examples/blockstack: the multi-process storage-stack
#                     demo (scripts/demo, tests/e2e/)

BLOCKSTACK_SRC := $(wildcard examples/blockstack/*.c)
BLOCKSTACK_OBJ := $(BLOCKSTACK_SRC:%.c=$(B)/obj/%.o)
BLOCKSTACK     := $(B)/blockstack

$(BLOCKSTACK): $(BLOCKSTACK_OBJ) $(LIBFAY_A)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(BLOCKSTACK_OBJ) $(LIBFAY_A) -lpthread

examples: $(BLOCKSTACK)

# scripts/demo runs what this build tree holds (make O=DIR demo too).
demo: export FAY_BUILD := $(abspath $(B))
