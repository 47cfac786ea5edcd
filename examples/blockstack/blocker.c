// SPDX-License-Identifier: MIT
/*
 * blockstack blocker (the storage layer): keeps each object in a file
 * under --dir/<name>/, writes going through a journal first.  Traced with
 * libfay's API: a span per operation continuing the mapper's trace, with
 * a timestamp annotation at each phase boundary (queue: received; journal:
 * appending to the journal; filestore: writing or reading the object
 * file) and tags object, offset, size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockstack.h"

/* The K of "--hold NAME:K" when NAME is this blocker, else 0. */
static long hold_at(const struct bs_opts *o)
{
	size_t n = strlen(o->name);

	if (!o->hold || strncmp(o->hold, o->name, n) || o->hold[n] != ':')
		return 0;
	return strtol(o->hold + n + 1, NULL, 10);
}

/*
 * --hold: stay inside the open span until killed, after telling the test
 * our pid in DIR/NAME.held (written, then renamed into place).
 */
static void hold(const char *dir, const char *name)
{
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.held", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
		rename(tmp, path);
	}
	for (;;)
		pause();
}

/* Do one operation; returns 0 or an errno, *rlen bytes of read data in out. */
static int serve(const struct bs_opts *o, int dirfd, int journal,
		 const struct bs_msg *m, const uint8_t *data, uint8_t *out,
		 struct fay_span *s)
{
	ssize_t n;
	int fd;

	if (m->op == BS_WRITE) {
		fay_span_event(s, "journal");
		errno = 0;
		if (write(journal, m, sizeof(*m)) != (ssize_t)sizeof(*m) ||
		    write(journal, data, m->len) != (ssize_t)m->len)
			return errno ? errno : EIO;
		fay_span_event(s, "filestore");
		fd = openat(dirfd, m->object, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return errno;
		n = pwrite(fd, data, m->len, (off_t)m->offset);
		close(fd);
		return n == (ssize_t)m->len ? 0 : n < 0 ? errno : EIO;
	}
	fay_span_event(s, "filestore");
	memset(out, 0, m->size);
	fd = openat(dirfd, m->object, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;   /* never written: zeros */
	n = pread(fd, out, m->size, (off_t)m->offset);
	close(fd);
	return n < 0 ? errno : 0;
}

int role_blocker(const struct bs_opts *o)
{
	uint8_t *buf = NULL, *out = NULL;
	size_t cap = 0, ocap = 0;
	unsigned long long spans = 0;
	long ops = 0, hold_k = hold_at(o);
	char dir[4096];
	int lfd, port, up = -1, dirfd = -1, journal = -1, ret = 1, err = 0;
	struct bs_msg m;

	snprintf(dir, sizeof(dir), "%s/%s", o->dir, o->name);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "%s: mkdir %s: %s\n", o->name, dir, strerror(errno));
		return 1;
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	journal = openat(dirfd, "journal", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (dirfd < 0 || journal < 0) {
		fprintf(stderr, "%s: %s: %s\n", o->name, dir, strerror(errno));
		goto out;
	}
	lfd = bs_listen(&port);
	if (lfd < 0) {
		fprintf(stderr, "%s: listen: %s\n", o->name, strerror(-lfd));
		goto out;
	}
	bs_role_init(o->name, port, 0);
	bs_notify(o->notify_fd, "PORT %d", port);
	up = bs_accept(lfd);
	close(lfd);
	if (up < 0) {
		fprintf(stderr, "%s: accept: %s\n", o->name, strerror(-up));
		goto out;
	}
	for (;;) {
		struct bs_msg r = { .op = BS_REPLY };
		struct fay_span *s;

		err = bs_recv(up, &m, &buf, &cap);
		if (err || m.op == BS_QUIT)
			break;
		s = fay_span_remote(m.traceparent, m.op == BS_WRITE ? "write" : "read");
		fay_span_event(s, "queue");
		fay_span_tag(s, "object", m.object);
		fay_span_tag_int(s, "offset", (int64_t)m.offset);
		fay_span_tag_int(s, "size", m.size);
		bs_burn(o->cpu_us);
		if (++ops == hold_k)
			hold(o->dir, o->name);
		r.id = m.id;
		if ((m.op != BS_WRITE && m.op != BS_READ) ||
		    (m.op == BS_WRITE && m.len != m.size) ||
		    m.offset + m.size > o->object_size || strchr(m.object, '/') ||
		    !m.object[0] || m.object[0] == '.') {
			r.status = EINVAL;
		} else if (m.op == BS_READ && bs_reserve(&out, &ocap, m.size)) {
			r.status = ENOMEM;
		}
		if (!r.status)
			r.status = (uint16_t)serve(o, dirfd, journal, &m, buf, out, s);
		if (r.status)
			fay_span_tag(s, "error", strerror(r.status));
		r.len = m.op == BS_READ && !r.status ? m.size : 0;
		/* End before replying: the span lies inside the mapper's. */
		fay_span_end(s);
		spans += bs_traceparent_sampled(m.traceparent);
		err = bs_send(up, &r, r.len ? out : NULL);
		if (err)
			break;
	}
	if (err && err != -EPIPE)
		fprintf(stderr, "%s: from the mapper: %s\n", o->name, strerror(-err));
	ret = err && err != -EPIPE ? 1 : 0;
out:
	if (up >= 0)
		close(up);
	if (journal >= 0)
		close(journal);
	if (dirfd >= 0)
		close(dirfd);
	bs_notify(o->notify_fd, "SPANS %llu", spans);
	free(buf);
	free(out);
	return ret;
}
