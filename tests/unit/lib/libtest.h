/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the libfay tests: a private FAY_SHM_DIR, finding and
 * mapping a process's shm file the way the agent does (read-only, by
 * name), and reading every record of its rings back with the ring
 * consumer and the span decoder.
 */
#ifndef FAY_TEST_LIBTEST_H
#define FAY_TEST_LIBTEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fay/ring.h>

#include "common/err.h"
#include "common/ring/ring.h"
#include "common/spanrec.h"
#include "common/tscmap.h"
#include "test.h"

static char lt_dir[PATH_MAX];
static pid_t lt_owner;

/* Remove a directory, the files in it and its subdirectories'. */
static inline void lt_rmdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char sub[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!unlinkat(dirfd(d), e->d_name, 0) || errno != EISDIR)
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) < (int)sizeof(sub))
			lt_rmdir(sub);
	}
	closedir(d);
	rmdir(dir);
}

/* Remove the temporary directory (only in the process that made it: fork
 * children exit too).  FAY_TEST_KEEP=1 keeps it for a post-mortem. */
static inline void lt_cleanup(void)
{
	if (getpid() == lt_owner && !getenv("FAY_TEST_KEEP"))
		lt_rmdir(lt_dir);
}

/* A fresh FAY_SHM_DIR for this test program, removed at exit (by the
 * process that made it). */
static inline void lt_setup(void)
{
	strcpy(lt_dir, "/tmp/fay-libtest-XXXXXX");
	if (!mkdtemp(lt_dir)) {
		perror("mkdtemp");
		exit(2);
	}
	setenv("FAY_SHM_DIR", lt_dir, 1);
	lt_owner = getpid();
	atexit(lt_cleanup);
}

/* Number of files in dir whose name starts with prefix; the last one's
 * path goes to path (may be NULL). */
static inline int lt_count_in(const char *dir, const char *prefix, char *path,
			      size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		n++;
		if (path && snprintf(path, len, "%s/%s", dir, e->d_name) >= (int)len)
			n = -1000;  /* cannot name it: make the count wrong */
	}
	closedir(d);
	return n;
}

/* The same in this test's directory. */
static inline int lt_count(const char *prefix, char *path, size_t len)
{
	return lt_count_in(lt_dir, prefix, path, len);
}

/* The shm file of process pid: 1 if exactly one, its path in path. */
static inline int lt_find(pid_t pid, char *path, size_t len)
{
	char prefix[64];

	snprintf(prefix, sizeof(prefix), FAY_SHM_PREFIX "%d-", (int)pid);
	return lt_count(prefix, path, len);
}

struct lt_view {
	const uint8_t *base;
	size_t size;
	const struct fay_shm_hdr *hdr;
};

/* Map a shm file read-only, as the agent does.  0 or -errno. */
static inline int lt_map(const char *path, struct lt_view *v)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	v->size = (size_t)st.st_size;
	v->base = mmap(NULL, v->size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (v->base == MAP_FAILED)
		return -errno;
	v->hdr = (const struct fay_shm_hdr *)v->base;
	return 0;
}

static inline void lt_unmap(struct lt_view *v)
{
	if (v->base && v->base != MAP_FAILED)
		munmap((void *)v->base, v->size);
	v->base = NULL;
}

static inline const struct fay_ring_ctl *lt_ctl(const struct lt_view *v, uint32_t i)
{
	return (const struct fay_ring_ctl *)(v->base + v->hdr->rings_off +
					     i * v->hdr->ring_stride);
}

/* Records committed in all rings so far. */
static inline uint64_t lt_records(const struct lt_view *v)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < v->hdr->nrings; i++)
		n += __atomic_load_n(&lt_ctl(v, i)->records, __ATOMIC_ACQUIRE);
	return n;
}

/* One decoded span record, with its own copy of the bytes. */
struct lt_span {
	struct spanrec r;
	uint8_t *bytes;
	uint32_t ring;
	uint64_t rec_no;
};

struct lt_spans {
	struct lt_span *v;
	size_t n, cap;
	unsigned bad;            /* records that did not decode */
	uint64_t lost, corrupt;  /* summed over the rings' consumers */
	uint32_t cur_ring;
	const struct fay_shm_hdr *hdr; /* its TSC line converts TICKS records */
};

static inline int lt_collect(void *ctx, uint16_t type, const void *payload,
		      uint32_t len, uint64_t rec_no)
{
	struct lt_spans *s = ctx;
	struct lt_span *sp;
	char err[160];

	if (type != FAY_REC_SPAN) {
		s->bad++;
		return 0;
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	sp = &s->v[s->n];
	sp->bytes = malloc(len ? len : 1);
	if (!sp->bytes)
		abort();
	memcpy(sp->bytes, payload, len);
	if (spanrec_decode(sp->bytes, len, &sp->r, err, sizeof(err)) != (int)len) {
		diag("ring %u record %llu: %s", s->cur_ring,
		     (unsigned long long)rec_no, err);
		free(sp->bytes);
		s->bad++;
		return 0;
	}
	if (sp->r.f.flags & SPAN_F_TICKS) {  /* as the agent does (ABI.md 1.2.2) */
		struct tsc_map m;

		tsc_map_line(&m, s->hdr->clk_tsc0, s->hdr->clk_ns0, s->hdr->clk_mult);
		tsc_map_span(&m, sp->bytes, &sp->r);
	}
	sp->ring = s->cur_ring;
	sp->rec_no = rec_no;
	s->n++;
	return 0;
}

/* Read every record of every ring from the start. */
static inline void lt_read_all(const struct lt_view *v, struct lt_spans *out)
{
	memset(out, 0, sizeof(*out));
	out->hdr = v->hdr;
	for (uint32_t i = 0; i < v->hdr->nrings; i++) {
		struct ring_cons c;

		if (ring_cons_init(&c, lt_ctl(v, i), v->hdr->ring_slots, 0, 0)) {
			out->bad++;
			continue;
		}
		out->cur_ring = i;
		ring_drain(&c, lt_collect, out, 0);
		out->lost += c.lost;
		out->corrupt += c.corrupt;
		ring_cons_free(&c);
	}
}

static inline void lt_spans_free(struct lt_spans *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].bytes);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* The span with this id, or NULL. */
static inline const struct lt_span *lt_by_id(const struct lt_spans *s, uint64_t id)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].r.f.span_id == id)
			return &s->v[i];
	return NULL;
}

/* The first item of a type in a record (n-th with skip), or 0. */
static inline int lt_item(const struct spanrec *r, unsigned type, unsigned skip,
		   struct spanrec_item *it)
{
	uint32_t off = 0;

	while (spanrec_next(r, &off, it))
		if (it->type == type && !skip--)
			return 1;
	return 0;
}

static inline int lt_streq(struct spanrec_str s, const char *want)
{
	return s.len == strlen(want) && !memcmp(s.p, want, s.len);
}

/* Parse a traceparent we wrote: exactly "00-<32>-<16>-<2>" lower case. */
static inline int lt_tp(const char *tp, uint64_t *hi, uint64_t *lo, uint64_t *id,
		 unsigned *flags)
{
	char f[3];

	if (strlen(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' ||
	    tp[0] != '0' || tp[1] != '0')
		return -1;
	for (int i = 0; i < 55; i++)
		if (tp[i] != '-' && !((tp[i] >= '0' && tp[i] <= '9') ||
				      (tp[i] >= 'a' && tp[i] <= 'f')))
			return -1;
	if (spanrec_parse_trace(tp + 3, 32, hi, lo) || spanrec_parse_id(tp + 36, 16, id))
		return -1;
	memcpy(f, tp + 53, 2);
	f[2] = 0;
	*flags = (unsigned)strtoul(f, NULL, 16);
	return 0;
}

#endif
