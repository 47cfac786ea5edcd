// SPDX-License-Identifier: MIT
/* Secret files: see secret.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/secret.h"

#define SECRET_MAX (1u << 20)

/* Contract in secret.h. */
int secret_file_read(const char *path, char **text, char *err, size_t errlen)
{
	struct stat st;
	size_t n = 0;
	char *buf;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	if (st.st_mode & 007) {
		close(fd);
		snprintf(err, errlen, "%s: mode %04o lets every user of this host read or change "
			 "it; a file of secrets must not (chmod o-rwx %s)", path,
			 (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	if ((size_t)st.st_size > SECRET_MAX) {
		close(fd);
		snprintf(err, errlen, "%s: larger than %u bytes", path, SECRET_MAX);
		return -EFBIG;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r ? -errno : -EIO;
			snprintf(err, errlen, "%s: %s", path, r ? strerror(errno) : "file shrank");
			close(fd);
			free(buf);
			return ret;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	if (strlen(buf) != n) {
		free(buf);
		snprintf(err, errlen, "%s: holds a NUL byte (not a text file)", path);
		return -EINVAL;
	}
	*text = buf;
	return 0;
}

/* Contract in secret.h. */
int secret_file_token(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	char *text, *line, *save = NULL;
	int ret = secret_file_read(path, &text, err, errlen);
	size_t len;

	if (ret)
		return ret;
	len = strlen(text);
	ret = -ENOENT;
	snprintf(err, errlen, "%s: no token in it (a line TOKEN; '#' starts a comment)", path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t skip = strspn(line, " \t\r"), n;

		if (!line[skip] || line[skip] == '#')
			continue;
		n = strcspn(line + skip, " \t\r");
		if (n >= outlen) {
			snprintf(err, errlen, "%s: the token is longer than %zu bytes", path,
				 outlen - 1);
			ret = -E2BIG;
		} else {
			memcpy(out, line + skip, n);
			out[n] = '\0';
			ret = 0;
		}
		break;
	}
	explicit_bzero(text, len);
	free(text);
	return ret;
}
