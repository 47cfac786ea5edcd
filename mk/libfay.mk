# SPDX-License-Identifier: MIT
# libfay build flags (src/lib/) and its tests' shared header.
#
# TLS in libfay.so: the hot path reads per-thread state on every call.  The
# traditional general-dynamic model costs a __tls_get_addr() call per
# access.  The thread block of src/lib (struct lib_tls, ~450 bytes) and the
# id generator's state (src/common/rand.c, 40 bytes) use initial-exec (one
# %fs-relative load; a dlopen()ed libfay takes them from glibc's static TLS
# surplus, 512 bytes by default); anything else in the library uses TLS
# descriptors (gnu2), cheap and dlopen-safe.
# (gcc on x86-64; clang 14 does not know the flag.)
LIBFAY_TLSDESC := $(shell $(CC) -mtls-dialect=gnu2 -E -x c /dev/null >/dev/null 2>&1 && echo y)
ifeq ($(LIBFAY_TLSDESC),y)
$(B)/pic/%.o: CFLAGS += -mtls-dialect=gnu2
endif
$(B)/pic/src/common/rand.o: CFLAGS += -ftls-model=initial-exec

# The libfay tests include tests/unit/lib/libtest.h.
$(filter $(B)/tests/unit/lib/%,$(UNIT_BIN)): tests/unit/lib/libtest.h
