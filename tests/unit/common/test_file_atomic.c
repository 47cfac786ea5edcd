// SPDX-License-Identifier: MIT
/* src/common/file_atomic.c: a file is replaced whole with the mode asked
 * for, no temporary file is left behind (on success or failure), a symlink
 * planted at the path is replaced rather than followed, a failed write
 * leaves the old content, and fsync_dir_of() takes a bare name. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_atomic.h"
#include "test.h"

static char dir[] = "/tmp/fay-test-atomic-XXXXXX";

/* The content of path ("" when it cannot be read). */
static const char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* How many entries dir holds (without . and ..). */
static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	char path[128], victim[128], missing[160];
	struct stat st;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(missing, sizeof(missing), "%s/no/such/dir/file", dir);

	is_int(file_write_atomic(path, "one\n", 4, 0600, 0), 0, "a new file");
	is_str(slurp(path), "one\n", "... holds what was written");
	ok(!stat(path, &st) && (st.st_mode & 0777) == 0600, "... mode 0600");
	is_int(file_write_atomic(path, "second\n", 7, 0644, FILE_ATOMIC_NOSYNC), 0,
	       "replaced (no fsync)");
	is_str(slurp(path), "second\n", "... the new content whole");
	ok(!stat(path, &st) && (st.st_mode & 0777) == 0644, "... mode 0644");
	is_int(entries(), 1, "no temporary file left");

	is_int(file_write_atomic(path, "", 0, 0600, 0), 0, "an empty file");
	ok(!stat(path, &st) && st.st_size == 0, "... is empty");

	/* a symlink planted at the path: replaced, its target untouched */
	if (unlink(path) || symlink(victim, path))
		return 1;
	is_int(file_write_atomic(path, "mine\n", 5, 0600, 0), 0, "over a planted symlink");
	ok(!lstat(path, &st) && S_ISREG(st.st_mode), "... the path is a regular file now");
	ok(access(victim, F_OK) && errno == ENOENT, "... the link's target was not created");

	is_int(file_write_atomic(missing, "x", 1, 0600, 0), -ENOENT, "a missing directory: -ENOENT");
	is_str(slurp(path), "mine\n", "a failed write elsewhere changes nothing");
	is_int(entries(), 1, "... and leaves no temporary file");

	if (chdir(dir))
		return 1;
	is_int(fsync_dir_of("state"), 0, "fsync_dir_of a bare name (.)");
	is_int(fsync_dir_of(path), 0, "fsync_dir_of a path");
	is_int(fsync_dir_of("/nonexistent-dir/x"), -ENOENT, "... of a missing directory: -ENOENT");

	unlink(path);
	rmdir(dir);
	return test_done();
}
