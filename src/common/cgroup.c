// SPDX-License-Identifier: MIT
/*
 * Control groups and the containers they name (cgroup.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cgroup.h"

const char *cgroup2_root(void)
{
	static const char *const where[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	char fn[64];
	struct stat st;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		snprintf(fn, sizeof(fn), "%s/cgroup.procs", where[i]);
		/* cgroup v1's hierarchies have no cgroup.controllers file */
		if (!stat(fn, &st)) {
			snprintf(fn, sizeof(fn), "%s/cgroup.controllers", where[i]);
			if (!stat(fn, &st))
				return where[i];
		}
	}
	return NULL;
}

#define CG_MAX_DEPTH 32

/* Depth-first under dir (path rel below the root); rel has room for 4096. */
static int walk(int dirfd, char *rel, size_t rlen, int depth,
		int (*cb)(uint64_t, const char *, void *), void *arg)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > CG_MAX_DEPTH)
		return 0;
	d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return 0;
	}
	while (!rc && (de = readdir(d))) {
		struct stat st;
		int fd;
		size_t n;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = strlen(rel);
		if (n + 1 + strlen(de->d_name) >= rlen || fstat(fd, &st)) {
			close(fd);
			continue;
		}
		snprintf(rel + n, rlen - n, "%s%s", n == 1 ? "" : "/", de->d_name);
		rc = cb((uint64_t)st.st_ino, rel, arg);
		if (!rc)
			rc = walk(fd, rel, rlen, depth + 1, cb, arg);
		else
			close(fd);
		rel[n] = '\0';
	}
	closedir(d);
	return rc;
}

int cgroup_foreach(int (*cb)(uint64_t id, const char *path, void *arg), void *arg)
{
	const char *root = cgroup2_root();
	char rel[4096] = "/";
	struct stat st;
	int fd, rc;

	if (!root)
		return -ENOENT;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -ENOENT;
	}
	rc = cb((uint64_t)st.st_ino, rel, arg);
	if (rc) {
		close(fd);
		return rc;
	}
	return walk(fd, rel, sizeof(rel), 0, cb, arg);
}

struct find {
	uint64_t id;
	char *path;
	size_t len;
};

static int find_cb(uint64_t id, const char *path, void *arg)
{
	struct find *f = arg;

	if (id != f->id)
		return 0;
	snprintf(f->path, f->len, "%s", path);
	return 1;
}

int cgroup_path_of(uint64_t id, char *path, size_t len)
{
	struct find f = { id, path, len };

	return cgroup_foreach(find_cb, &f) == 1 ? 0 : -ENOENT;
}

/* s (n bytes) is a hex container id of 64 digits (docker's, podman's). */
static bool is_id(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* systemd's unit-name escaping: "\x2d" is '-'. */
static void unescape(const char *s, size_t n, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < len; i++) {
		unsigned int c;

		if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' &&
		    sscanf(s + i + 2, "%2x", &c) == 1) {
			out[o++] = (char)c;
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* One path component (n bytes): the container it names, into out (a
 * name, or an id's first 12 digits); the whole id into id when it names
 * one by id (else id is left alone). */
static bool component(const char *c, size_t n, const char *parent, size_t pn, char *out,
		      size_t len, char *id)
{
	static const char *const pre[] = { "libpod-", "docker-", "cri-containerd-", "crio-" };
	const char *scope = ".scope";
	size_t sl = strlen(scope);

	if (n > sl && !memcmp(c + n - sl, scope, sl)) {
		size_t body = n - sl;

		if (body > 8 && !memcmp(c, "machine-", 8)) {
			unescape(c + 8, body - 8, out, len);
			return true;
		}
		for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++) {
			size_t pl = strlen(pre[i]);

			if (body > pl && !memcmp(c, pre[i], pl) && is_id(c + pl, body - pl)) {
				snprintf(out, len, "%.12s", c + pl);
				snprintf(id, CGROUP_ID_LEN + 1, "%.64s", c + pl);
				return true;
			}
		}
		return false;
	}
	/* cgroupfs drivers: /docker/ID, /libpod_parent/libpod-ID, /kubepods/.../ID */
	if (is_id(c, n) && parent &&
	    ((pn == 6 && !memcmp(parent, "docker", 6)) ||
	     (pn == 13 && !memcmp(parent, "libpod_parent", 13)) ||
	     (pn > 3 && !memcmp(parent, "pod", 3)))) {
		snprintf(out, len, "%.12s", c);
		snprintf(id, CGROUP_ID_LEN + 1, "%.64s", c);
		return true;
	}
	if (n > 7 && !memcmp(c, "libpod-", 7) && is_id(c + 7, n - 7)) {
		snprintf(out, len, "%.12s", c + 7);
		snprintf(id, CGROUP_ID_LEN + 1, "%.64s", c + 7);
		return true;
	}
	return false;
}

void cgroup_str_cut(char *out, size_t size, const char *v)
{
	size_t l = strlen(v);

	if (size < 4)
		return;
	memset(out, 0, size);
	if (l < size) {
		memcpy(out, v, l);
		return;
	}
	memcpy(out, "...", 3);
	memcpy(out + 3, v + l - (size - 4), size - 4);
}

void cgroup_container(const char *path, char *out, size_t len)
{
	char id[CGROUP_ID_LEN + 1];

	cgroup_container_id(path, out, len, id);
}

void cgroup_container_id(const char *path, char *out, size_t len,
			 char id[CGROUP_ID_LEN + 1])
{
	const char *end = path + strlen(path);

	out[0] = '\0';
	id[0] = '\0';
	/* from the innermost component outwards */
	while (end > path) {
		const char *s = end, *ps, *pe;

		while (s > path && s[-1] != '/')
			s--;
		pe = s > path ? s - 1 : s;
		ps = pe;
		while (ps > path && ps[-1] != '/')
			ps--;
		if (s < end && component(s, (size_t)(end - s), pe > ps ? ps : NULL,
					 (size_t)(pe - ps), out, len, id))
			return;
		end = s > path ? s - 1 : path;
	}
	out[0] = '\0';
}

int cgroup_path_of_pid(pid_t pid, char *path, size_t len)
{
	char fn[64], line[4200];
	int ret = -ENOENT;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/cgroup", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(path, len, "%s", line[3] ? line + 3 : "/");
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

uint64_t cgroup_id_of_pid(pid_t pid)
{
	const char *root = cgroup2_root();
	char path[4096], dir[4400];
	struct stat st;

	if (!root || cgroup_path_of_pid(pid, path, sizeof(path)))
		return 0;
	snprintf(dir, sizeof(dir), "%s%s", root, path);
	return stat(dir, &st) ? 0 : (uint64_t)st.st_ino;
}

int cgroup_scope_of(const char *path, uint64_t *id, int *level, char *canon, size_t clen,
		    char *why, size_t whylen)
{
	const char *root = cgroup2_root();
	char dir[4400];
	struct stat st;
	size_t o = 0;
	int n = 0;

	if (!root) {
		snprintf(why, whylen, "no cgroup2 file system is mounted (/sys/fs/cgroup, "
			 "/sys/fs/cgroup/unified)");
		return -ENOENT;
	}
	/* "a//b/" as "/a/b"; "." and ".." are refused, not resolved */
	for (const char *s = path; *s;) {
		size_t l;

		while (*s == '/')
			s++;
		l = strcspn(s, "/");
		if (!l)
			break;
		if ((l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.')) {
			snprintf(why, whylen, "cgroup \"%s\": \".\" and \"..\" are not taken; "
				 "give the path under the cgroup2 root (%s)", path, root);
			return -EINVAL;
		}
		if (o + 1 + l >= clen) {
			snprintf(why, whylen, "cgroup \"%.64s...\": longer than %zu bytes", path,
				 clen - 1);
			return -ENAMETOOLONG;
		}
		canon[o++] = '/';
		memcpy(canon + o, s, l);
		o += l;
		n++;
		s += l;
	}
	if (!o)
		canon[o++] = '/';
	canon[o] = '\0';
	snprintf(dir, sizeof(dir), "%s%s", root, canon);
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		int e = stat(dir, &st) ? errno : ENOTDIR;

		snprintf(why, whylen, "cgroup \"%s\": no such cgroup (%s%s: %s)", path, root,
			 canon, strerror(e));
		return -ENOENT;
	}
	*id = (uint64_t)st.st_ino;
	*level = n;
	return 0;
}

int cgroup_path_under(const char *p, const char *scope)
{
	size_t l = strlen(scope);

	if (l == 1 && scope[0] == '/')
		return 1;
	return !strncmp(p, scope, l) && (p[l] == '\0' || p[l] == '/');
}
