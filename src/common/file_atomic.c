/* SPDX-License-Identifier: MIT */
/* Replacing a small file whole: contract in file_atomic.h. */
#include "common/file_atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fsync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, ret = 0;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

int file_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int file_write_atomic(const char *path, const void *buf, size_t len, mode_t mode,
		      unsigned flags)
{
	bool sync = !(flags & FILE_ATOMIC_NOSYNC);
	char *tmp = NULL;
	int fd, ret;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		free(tmp);
		return ret;
	}
	ret = fchmod(fd, mode) ? -errno : 0;
	if (!ret)
		ret = file_write_all(fd, buf, len);
	if (!ret && sync && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	else if (sync)
		ret = fsync_dir_of(path);
	free(tmp);
	return ret;
}
