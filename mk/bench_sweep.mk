# SPDX-License-Identifier: MIT
# bench/site_sweep.c: every exported function of glibc, libz, libsqlite3,
# libcrypto and liblzma patched inline in a live process and detached,
# with the process's self-check after each batch (run as
# $(B)/bench/site_sweep libc.so.6 libz.so.1 ...; bench/RESULTS.md).
BENCH_SWEEP := $(B)/bench/site_sweep

$(BENCH_SWEEP): bench/site_sweep.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS) \
		-lz -lsqlite3 -lcrypto -llzma -ldl

bench: $(BENCH_SWEEP)
