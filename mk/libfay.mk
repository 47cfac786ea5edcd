# SPDX-License-Identifier: MIT
# libfay build flags (src/lib/) and its tests' shared header.
#
# TLS in libfay.so: the hot path reads per-thread state on every call.  The
# traditional general-dynamic model costs a __tls_get_addr() call per
# access.  The thread block of src/lib (struct lib_tls, ~400 bytes) and the
# id generator's state (src/common/rand.c, 40 bytes) use initial-exec (one
# %fs-relative load; a dlopen()ed libfay takes them from glibc's static TLS
# surplus, 512 bytes by default); anything else in the library uses TLS
# descriptors (gnu2), cheap and dlopen-safe.
ifeq ($(shell uname -m),x86_64)
$(B)/pic/%.o: CFLAGS += -mtls-dialect=gnu2
endif
$(B)/pic/src/common/rand.o: CFLAGS += -ftls-model=initial-exec

# The libfay tests include tests/unit/lib/libtest.h.
$(filter $(B)/tests/unit/lib/%,$(UNIT_BIN)): tests/unit/lib/libtest.h
