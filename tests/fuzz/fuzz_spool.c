// SPDX-License-Identifier: MIT
/*
 * The agent's files after a crash, a full disk or tampering: the first
 * byte picks what the rest is, a spooled batch (state-dir/spool/
 * 00000000000000000001.batch, opened by spool_open() as at start-up) or
 * the ring cursor file (cursor_load()).  Properties: a damaged batch is
 * counted and removed, never kept; a cursor file that loads saves and
 * loads again to the same table.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/spool.h"
#include "fuzz.h"

static char dir[64] = "/tmp/fay-fuzz-spool.XXXXXX";
static char sdir[128], cpath[128], bpath[192];

/* The run's files and directory, gone at exit (libFuzzer's end of
 * -max_total_time and -runs is exit()): each run had left one behind. */
static void cleanup(void)
{
	unlink(bpath);
	unlink(cpath);
	rmdir(sdir);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(sdir, sizeof(sdir), "%s/spool", dir);
	snprintf(cpath, sizeof(cpath), "%s/cursors", dir);
	snprintf(bpath, sizeof(bpath), "%s/00000000000000000001.batch", sdir);
	mkdir(sdir, 0700);
	return 0;
}

static void put(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor_tab t = { 0 }, t2 = { 0 };
	char err[512];

	if (size < 1 || size > 65536)
		return 0;
	if (data[0] & 1) {
		put(cpath, data + 1, size - 1);
		if (!cursor_load(cpath, &t, err, sizeof(err))) {
			FUZZ_CHECK(!cursor_save(cpath, &t, 0), "saving a loaded cursor table");
			FUZZ_CHECK(!cursor_load(cpath, &t2, err, sizeof(err)), "%s", err);
			FUZZ_CHECK(t.n == t2.n && t.seq == t2.seq &&
				   (!t.n || !memcmp(t.v, t2.v, t.n * sizeof(*t.v))),
				   "a cursor table changed through save and load");
		}
	} else {
		struct spool sp;

		unlink(cpath);
		put(bpath, data + 1, size - 1);
		if (!spool_open(&sp, sdir, cpath, 1u << 20, 0, &t)) {
			if (sp.corrupt_files)
				FUZZ_CHECK(access(bpath, F_OK) && !sp.nbatches,
					   "a damaged batch was kept");
			spool_close(&sp);	/* t stays the caller's */
		}
		unlink(bpath);
	}
	cursor_tab_free(&t);
	cursor_tab_free(&t2);
	return 0;
}
