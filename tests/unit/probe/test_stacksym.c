// SPDX-License-Identifier: MIT
/*
 * The user-stack symbolizer (src/probe/stacksym.c): a mapping read
 * before stays when a later read of the process's maps does not show it
 * (the kernel reads maps without the mmap lock: a read while a process
 * exits sees part of them, and inline_stacks.sh's python3 run named its
 * libc frames "[unknown]" after such a read), unless a new mapping
 * overlaps it.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"
#include "probe/stacksym.h"

int main(void)
{
	struct stacksym *s = stacksym_new();
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	long pg = sysconf(_SC_PAGESIZE);
	char *m = fd >= 0 ? mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0)
			  : MAP_FAILED;
	uint64_t ips[2];
	char buf[256];

	ok(s && m != MAP_FAILED, "a symbolizer, and this test's file mapped executable");
	if (!s || m == MAP_FAILED)
		return test_done();
	ips[0] = (uint64_t)(uintptr_t)m + 0x10;
	ips[1] = 0;
	stacksym_process(s, getpid());
	stacksym_fold(s, true, getpid(), ips, 1, buf, sizeof(buf));
	ok(strstr(buf, "test_stacksym") != NULL, "an address in the mapping is named from it: %s", buf);
	munmap(m, 2 * (size_t)pg);
	stacksym_process(s, getpid());	/* read again: it is gone from the maps */
	stacksym_fold(s, true, getpid(), ips, 1, buf, sizeof(buf));
	ok(strstr(buf, "test_stacksym") != NULL,
	   "read again without it: the mapping read before still names it: %s", buf);
	m = mmap(m, (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		 -1, 0);
	if (m != MAP_FAILED) {
		stacksym_process(s, getpid());
		stacksym_fold(s, true, getpid(), ips, 1, buf, sizeof(buf));
		ok(strstr(buf, "test_stacksym") == NULL,
		   "a new mapping over it replaces it: %s", buf);
		munmap(m, (size_t)pg);
	}
	close(fd);
	stacksym_free(s);
	return test_done();
}
