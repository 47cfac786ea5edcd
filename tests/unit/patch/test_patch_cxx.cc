// SPDX-License-Identifier: MIT
/*
 * A C++ exception thrown through a function with an entry and an exit
 * probe: the unwinder walks through the trampoline (its call frame
 * information is registered) and the catch in the caller gets the
 * exception; the exit probe does not run for that call, the next calls
 * are probed as usual.
 */
#include <stdexcept>

extern "C" {
#include "test.h"
#include "patch/patch.h"
}

__attribute__((noinline)) long thrower(long a);
__attribute__((noinline)) long thrower(long a)
{
	volatile long x = a;

	if (x < 0)
		throw std::runtime_error("negative");
	return x * 2;
}

struct counts {
	long entries, exits;
};

static void on_entry(struct patch_regs *, void *arg)
{
	static_cast<counts *>(arg)->entries++;
}

static void on_exit_(struct patch_regs *, void *arg)
{
	static_cast<counts *>(arg)->exits++;
}

int main()
{
	counts c = { 0, 0 };
	char err[256] = "";
	long (*volatile f)(long) = thrower;
	struct patch_site *s = patch_site_new(reinterpret_cast<void *>(thrower), 64, err,
					      sizeof(err));
	int caught = 0;

	ok(s && !patch_site_arm(s, on_entry, on_exit_, &c, err, sizeof(err)),
	   "thrower armed with entry and exit probes %s", err);
	if (!s)
		return test_done();
	is_int(f(4), 8, "a normal call");
	for (int i = 0; i < 100; i++) {
		try {
			f(-1);
		} catch (const std::runtime_error &e) {
			caught++;
		}
	}
	is_int(caught, 100, "100 exceptions thrown through the probed frame were caught");
	is_int(f(5), 10, "a normal call after the exceptions");
	is_int(c.entries, 102, "102 entries");
	is_int(c.exits, 2, "2 exits (the throws skipped theirs)");
	patch_site_free(s);
	return test_done();
}
