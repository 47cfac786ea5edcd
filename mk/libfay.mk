# SPDX-License-Identifier: MIT
# libfay build flags (src/lib/).
#
# TLS in libfay.so: the hot path reads per-thread state (the thread's ring,
# its handle cache, the id generator) on every call.  The traditional
# general-dynamic model costs a __tls_get_addr() call per access; TLS
# descriptors (gnu2) cost a few instructions and still work when libfay is
# dlopen()ed (ctypes, plugins), unlike initial-exec.
ifeq ($(shell uname -m),x86_64)
$(B)/pic/%.o: CFLAGS += -mtls-dialect=gnu2
endif
