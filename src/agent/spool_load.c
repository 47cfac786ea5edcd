// SPDX-License-Identifier: MIT
/*
 * The agent's spool at start (spool_open, spool_int.h): every batch file
 * read back and checked (frame header, crc, batch structure, cursor
 * trailer), oldest first, its trailer's cursors applied; a renumbering
 * cut short finished; a damaged file removed and its spans counted lost;
 * leftover temporary files removed.  Also agent_mkdir_p().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/spool_int.h"
#include "common/wire.h"
#include "common/log.h"
#include "common/zlib.h"

/* Overwrite the frame header of spool file name with hdr (24 bytes). */
static int rewrite_hdr(int dfd, const char *name, const void *hdr)
{
	int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, hdr, FAY_WIRE_HDR_SIZE, 0) != FAY_WIRE_HDR_SIZE)
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

/*
 * Check one spool file (whole content buf, len bytes, named for seq):
 * frame header, crc, batch structure, trailer.  Fills *e and moves the
 * cursors in t forward when the batch is newer than t->seq.
 */
static int load_one(uint8_t *buf, size_t len, uint64_t seq,
		    struct spool_ent *e, struct cursor_tab *t, int *fixed,
		    char *err, size_t errlen)
{
	struct wire_hdr h;
	uint32_t magic, n, crc;
	size_t off;
	int ret;

	if (len < FAY_WIRE_HDR_SIZE) {
		snprintf(err, errlen, "%zu bytes, shorter than a frame header", len);
		return -EBADMSG;
	}
	memcpy(&h, buf, sizeof(h));
	ret = wire_hdr_check(&h, err, errlen);
	if (ret)
		return -EBADMSG;
	/* A renumbering cut short: earlier agents gave a NACKed batch a
	 * new seq (rename, then rewrite the header).  Finish it. */
	if (h.type == WIRE_BATCH && h.seq != seq && h.seq < seq &&
	    (size_t)h.len <= len - FAY_WIRE_HDR_SIZE &&
	    !wire_crc_check(&h, buf + FAY_WIRE_HDR_SIZE, err, errlen)) {
		wire_hdr_init(&h, WIRE_BATCH, seq, buf + FAY_WIRE_HDR_SIZE, h.len);
		memcpy((uint8_t *)buf, &h, sizeof(h));
		*fixed = 1;
	}
	if (h.type != WIRE_BATCH || h.seq != seq) {
		snprintf(err, errlen, "frame is %s seq %" PRIu64 ", want BATCH seq %" PRIu64,
			 wire_type_name(h.type), h.seq, seq);
		return -EBADMSG;
	}
	if ((size_t)h.len > len - FAY_WIRE_HDR_SIZE) {
		snprintf(err, errlen, "frame payload of %u bytes is cut at %zu", h.len,
			 len - FAY_WIRE_HDR_SIZE);
		return -EBADMSG;
	}
	if (wire_crc_check(&h, buf + FAY_WIRE_HDR_SIZE, err, errlen))
		return -EBADMSG;
	ret = wire_batch_walk(buf + FAY_WIRE_HDR_SIZE, h.len, NULL, NULL, err, errlen);
	if (ret < 0)
		return -EBADMSG;
	e->seq = seq;
	e->bytes = len;
	e->frame_len = FAY_WIRE_HDR_SIZE + h.len;
	e->nspans = (uint32_t)ret;

	off = e->frame_len;
	if (len - off < 12) {
		snprintf(err, errlen, "cursor trailer missing at byte %zu", off);
		return -EBADMSG;
	}
	memcpy(&magic, buf + off, 4);
	memcpy(&n, buf + off + 4, 4);
	if (magic != SPOOL_TRAILER_MAGIC || (len - off - 12) / sizeof(struct cursor) < n ||
	    len - off - 12 != (size_t)n * sizeof(struct cursor)) {
		snprintf(err, errlen, "cursor trailer at byte %zu: bad magic 0x%08x or count %u",
			 off, magic, n);
		return -EBADMSG;
	}
	memcpy(&crc, buf + len - 4, 4);
	if (crc != crc32_of(0, buf + off, len - off - 4)) {
		snprintf(err, errlen, "cursor trailer at byte %zu: checksum mismatch", off);
		return -EBADMSG;
	}
	if (seq > t->seq) {
		for (uint32_t i = 0; i < n; i++) {
			struct cursor c;

			memcpy(&c, buf + off + 8 + (size_t)i * sizeof(c), sizeof(c));
			ret = cursor_tab_set(t, &c);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int read_file_at(int dfd, const char *name, uint8_t **out, size_t *outlen)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int fd, ret = 0;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	if (st.st_size > (off_t)FAY_WIRE_MAX_PAYLOAD + (1 << 20)) {
		ret = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			free(buf);
			goto out;
		}
		got += (size_t)n;
	}
	*out = buf;
	*outlen = got;
out:
	close(fd);
	return ret;
}

int agent_mkdir_p(const char *path)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int seq_from_name(const char *name, uint64_t *seq)
{
	char *end;

	if (strlen(name) != 26 || strcmp(name + 20, ".batch"))
		return -EINVAL;
	errno = 0;
	*seq = strtoull(name, &end, 10);
	return errno || end != name + 20 || !*seq ? -EINVAL : 0;
}

/*
 * The span count of a damaged batch file, when its frame header and the
 * count at the start of the payload are still believable (so the loss can
 * be counted); 0 otherwise.
 */
static uint64_t damaged_count(const uint8_t *buf, size_t len)
{
	struct wire_hdr h;
	uint32_t n;

	if (!buf || len < FAY_WIRE_HDR_SIZE + WIRE_BATCH_COUNT_SIZE)
		return 0;
	memcpy(&h, buf, sizeof(h));
	/* h.len, not len: a file cut short still says what it held */
	if (h.magic != FAY_WIRE_MAGIC || h.type != WIRE_BATCH ||
	    h.len < WIRE_BATCH_COUNT_SIZE || h.len > FAY_WIRE_MAX_PAYLOAD)
		return 0;
	memcpy(&n, buf + FAY_WIRE_HDR_SIZE, sizeof(n));
	return (uint64_t)n * WIRE_BATCH_LEN_SIZE <= h.len - WIRE_BATCH_COUNT_SIZE ? n : 0;
}

int spool_open(struct spool *sp, const char *dir, const char *cursor_path,
	       uint64_t max_bytes, int sync, struct cursor_tab *t)
{
	DIR *d = NULL;
	struct dirent *de;
	int ret;

	memset(sp, 0, sizeof(*sp));
	sp->dfd = -1;
	sp->head.next = sp->head.prev = &sp->head;
	sp->max_bytes = max_bytes;
	sp->sync = sync;
	sp->tab = t;
	sp->saved_seq = t->seq;
	sp->dir = strdup(dir);
	sp->cursor_path = strdup(cursor_path);
	if (!sp->dir || !sp->cursor_path) {
		ret = -ENOMEM;
		goto err;
	}
	ret = agent_mkdir_p(dir);
	if (ret)
		goto err;
	sp->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->dfd < 0) {
		ret = -errno;
		goto err;
	}
	d = fdopendir(dup(sp->dfd));
	if (!d) {
		ret = -errno;
		goto err;
	}
	/* Collect first, apply trailers in seq order afterwards. */
	while ((de = readdir(d))) {
		struct spool_ent *e;
		uint64_t seq;

		if (de->d_name[0] == '.')
			continue;
		if (!strncmp(de->d_name, "tmp-", 4)) {
			/* A batch whose write was cut short: its cursors were
			 * never persisted, its records are still in the rings. */
			unlinkat(sp->dfd, de->d_name, 0);
			continue;
		}
		if (seq_from_name(de->d_name, &seq))
			continue;
		e = calloc(1, sizeof(*e));
		if (!e) {
			ret = -ENOMEM;
			goto err;
		}
		e->seq = seq;
		spool_list_insert_sorted(sp, e);
	}
	closedir(d);
	d = NULL;

	/* Now check each one, oldest first, applying cursor trailers. */
	sp->bytes = 0;
	for (struct spool_ent *e = spool_first(sp), *nx; e; e = nx) {
		char name[32], err[256];
		uint8_t *buf = NULL;
		size_t len = 0;
		int fixed = 0;

		nx = spool_next(sp, e);
		spool_ent_name(name, sizeof(name), e->seq);
		ret = read_file_at(sp->dfd, name, &buf, &len);
		if (!ret)
			ret = load_one(buf, len, e->seq, e, t, &fixed, err, sizeof(err));
		else
			snprintf(err, sizeof(err), "%s", errstr(ret));
		if (!ret && fixed)
			ret = rewrite_hdr(sp->dfd, name, buf);
		if (ret && ret != -ENOMEM) {
			uint64_t n = damaged_count(buf, len);

			pr_err("spool: %s/%s is damaged (%s); removing it: %s lost", dir, name, err,
			       n ? "its spans are" : "what it held is");
			if (n)
				pr_err("spool: %s/%s held %" PRIu64 " spans", dir, name, n);
			sp->damaged_spans += n;
		}
		free(buf);
		if (ret == -ENOMEM)
			goto err;
		if (ret) {
			sp->corrupt_files++;
			e->bytes = 0;
			spool_drop(sp, e);
			continue;
		}
		sp->bytes += e->bytes;
	}
	/* The table now covers the whole spool; the file does not yet. */
	if (sp->max_seq > t->seq) {
		t->seq = sp->max_seq;
		sp->dirty = 1;
	}
	return 0;
err:
	if (d)
		closedir(d);
	spool_close(sp);
	return ret;
}
