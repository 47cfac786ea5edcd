# SPDX-License-Identifier: MIT
# libfay-probe.so: the in-process runtime of inline probes (src/rt/), with
# the VM (src/vm/), the patcher (src/patch/) and the control channel's
# framing; no libbpf.  A program loads it with LD_PRELOAD (fay run), so it
# is never built with the sanitizers (ASan must come first in a process;
# the traced program is not sanitized).  Everything in it is hidden: it
# exports nothing but what the loader needs.  Capstone is linked in
# statically (and hidden): the runtime needs nothing but libc and libgcc_s (the JIT's
# __register_frame: every glibc base image has it), so that a
# copy of it loads in a container's process, whose root has no capstone
# (issue #25).
RT_SRC := $(wildcard src/rt/*.c src/vm/*.c src/patch/*.c) src/common/inline_wire.c src/common/bytes.c src/common/tsc.c src/common/procstat.c \
          src/common/unwind_table.c
RT_OBJ := $(RT_SRC:%.c=$(B)/rt/%.o)
RT_SO  := $(B)/libfay-probe.so
RT_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=% -fno-omit-frame-pointer,$(CFLAGS)) \
             -fPIC -fvisibility=hidden

$(B)/rt/%.o: %.c
	$(call msg,CC-RT,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(RT_CFLAGS) -MMD -MP -c $< -o $@

$(RT_SO): $(RT_OBJ)
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,-z,defs -Wl,-z,now -o $@ $(RT_OBJ) \
		-Wl,--exclude-libs,ALL -Wl,-Bstatic -lcapstone -Wl,-Bdynamic -lpthread

all: $(RT_SO)

# The inline probes' test workload (plain -O2: its symbols are probed).
INLINE_WORK := $(B)/tests/bin/inline_work
$(INLINE_WORK): tests/integration/inline_tools/inline_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -pthread -o $@ $<

# A program that counts on the lowest free descriptor (inline_fds.sh).
FD_WORK := $(B)/tests/bin/fd_work
$(FD_WORK): tests/integration/inline_tools/fd_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $<

all: $(FD_WORK)

# The same as inline_work, linked statically: a process fay cannot load its runtime into.
INLINE_WORK_STATIC := $(B)/tests/bin/inline_work_static
$(INLINE_WORK_STATIC): tests/integration/inline_tools/inline_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -pthread -static -DINLINE_WORK_STATIC -o $@ $<

# The library inline_work dlopen()s (a patched function in an object
# that goes away while attached).
INLINE_LIB := $(B)/tests/bin/libinline_lib.so
$(INLINE_LIB): tests/integration/inline_tools/inline_lib.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -shared -fPIC -Wall -Wextra -Werror -o $@ $<

# 256- and 512-bit vector arguments (target attributes: the build needs
# no AVX, the test skips on a CPU without it).
INLINE_VEC := $(B)/tests/bin/inline_vec
$(INLINE_VEC): tests/integration/inline_tools/inline_vec.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -pthread -o $@ $<

# The safety battery's workload: libc's common functions, called for real
# (-fno-builtin: no strlen or memcpy expanded inline).
LIBC_WORK := $(B)/tests/bin/libc_work
$(LIBC_WORK): tests/integration/inline_tools/libc_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -fno-builtin -Wall -Wextra -Werror -pthread -o $@ $<

# dlopen()s, calls and dlclose()s libinline_lib.so in a loop (issue 19
# item 3: sites of objects loaded later).
DLOPEN_LOOP := $(B)/tests/bin/dlopen_loop
$(DLOPEN_LOOP): tests/integration/inline_tools/dlopen_loop.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $< -ldl

# Calls glibc's IFUNCs strlen, memcpy, memset, strcmp (issue 19 item 4).
IFUNC_WORK := $(B)/tests/bin/ifunc_work
$(IFUNC_WORK): tests/integration/inline_tools/ifunc_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -fno-builtin -Wall -Wextra -Werror -o $@ $<

all: $(INLINE_WORK) $(INLINE_LIB) $(INLINE_WORK_STATIC) $(INLINE_VEC) $(LIBC_WORK) $(DLOPEN_LOOP) \
     $(IFUNC_WORK)
bench: $(INLINE_WORK)

# A libfay program (against libfay.so, as an application links it) for
# the trace_id / span_name fields of inline probes.
INLINE_SPANS := $(B)/tests/bin/inline_spans
$(INLINE_SPANS): tests/integration/inline_tools/inline_spans.c $(B)/libfay.so.0
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -pthread -Iinclude -o $@ $< \
		-L$(B) -l:libfay.so.0 -Wl,-rpath,$(abspath $(B))

all: $(INLINE_SPANS)

# The issue's stress run: 100 attach/detach cycles of a query on a process
# with 8 threads calling the probed function (CI's inline_robust.sh does
# its default 12: a cycle takes 3-15 s on the shared 2-core machine).
.PHONY: stress-inline
stress-inline: all
	INLINE_CYCLES=100 FAY_BUILD=$(B) tests/run tests/integration/inline_robust.sh

# The container tests' workload (issue #25): copied into a root file
# system of its own with a copy of its libc (tests/integration/container_*.sh).
CTR_WORK := $(B)/tests/bin/ctr_work
$(CTR_WORK): tests/integration/container_tools/ctr_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $<

all: $(CTR_WORK)

# A program whose executable segment fills its last page: no room for the
# trampoline of inject_library_at_entry() (tests/unit/probe/test_inject_entry.c).
NOROOM := $(B)/tests/bin/noroom
$(NOROOM): tests/integration/inline_tools/noroom.c tests/integration/inline_tools/noroom.ld
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $< \
		-Wl,-T,tests/integration/inline_tools/noroom.ld

all: $(NOROOM)

# Calls left by longjmp and by C++ exceptions at various depths (issue 19
# item 5: exceptional exits; inline_unwind.sh).
UNWIND_WORK := $(B)/tests/bin/unwind_work
$(UNWIND_WORK): tests/integration/inline_tools/unwind_work.c
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -o $@ $<

UNWIND_CXX := $(B)/tests/bin/unwind_cxx
$(UNWIND_CXX): tests/integration/inline_tools/unwind_cxx.cc
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CXX) -O2 -g -std=c++11 -Wall -Wextra -Werror -o $@ $<

all: $(UNWIND_WORK) $(UNWIND_CXX)

# The walker's unit test compiles src/rt/ustack.c into itself (the
# runtime is not in libfay-internal.a): rebuild it when that changes.
$(filter $(B)/tests/unit/rt/%,$(UNIT_BIN)): src/rt/ustack.c src/rt/rt.h
