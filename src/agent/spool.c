// SPDX-License-Identifier: MIT
/*
 * The agent's durable state: the spool of unacknowledged batches
 * (state-dir/spool/<seq>.batch) and the ring cursor file
 * (state-dir/cursors).  See the protocol in agent.h and docs/ABI.md.
 *
 * A spool file is the complete wire frame followed by a trailer:
 *   uint32 magic SPOOL_TRAILER_MAGIC ("FAYC"), uint32 n,
 *   n x struct cursor (32 bytes), uint32 crc32 of magic..cursors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "agent/spool.h"
#include "common/wire.h"
#include "common/log.h"

#define SPOOL_TRAILER_MAGIC UINT32_C(0x43594146) /* "FAYC" */
#define CURSOR_FILE_HEADER  "# fay agent cursors v1"

_Static_assert(sizeof(struct cursor) == 32, "cursor record");

/* ---- cursor table -------------------------------------------------------- */

void cursor_tab_free(struct cursor_tab *t)
{
	if (!t)
		return;
	free(t->v);
	t->v = NULL;
	t->n = t->cap = 0;
}

static struct cursor *tab_find(const struct cursor_tab *t, uint64_t instance,
			       uint32_t ring)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->v[i].instance == instance && t->v[i].ring == ring)
			return &t->v[i];
	return NULL;
}

const struct cursor *cursor_tab_get(const struct cursor_tab *t,
				    uint64_t instance, uint32_t ring)
{
	return tab_find(t, instance, ring);
}

int cursor_tab_reserve(struct cursor_tab *t, uint32_t n)
{
	uint32_t cap = t->cap ? t->cap : 16;
	struct cursor *v;

	if (t->n + n <= t->cap)
		return 0;
	while (cap < t->n + n)
		cap *= 2;
	v = realloc(t->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->v = v;
	t->cap = cap;
	return 0;
}

int cursor_tab_set(struct cursor_tab *t, const struct cursor *c)
{
	struct cursor *e = tab_find(t, c->instance, c->ring);

	if (e) {
		if (c->pos > e->pos) {
			e->pos = c->pos;
			e->rec_no = c->rec_no;
		}
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct cursor *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n] = *c;
	t->v[t->n]._pad = 0;
	t->n++;
	return 0;
}

void cursor_tab_forget(struct cursor_tab *t, uint64_t instance)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < t->n; i++)
		if (t->v[i].instance != instance)
			t->v[j++] = t->v[i];
	t->n = j;
}

int cursor_load(const char *path, struct cursor_tab *t, char *err, size_t errlen)
{
	char line[256];
	unsigned lineno = 0;
	FILE *f;
	int ret = 0;

	t->n = 0;
	t->seq = 0;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c;
		unsigned ring;
		struct cursor cur = { 0 };
		char extra;

		lineno++;
		if (lineno == 1) {
			if (strncmp(line, CURSOR_FILE_HEADER, strlen(CURSOR_FILE_HEADER))) {
				snprintf(err, errlen, "%s:1: not a cursor file (want \"%s\")",
					 path, CURSOR_FILE_HEADER);
				ret = -EBADMSG;
				break;
			}
			continue;
		}
		if (sscanf(line, "seq %llu %c", &a, &extra) == 1) {
			t->seq = a;
			continue;
		}
		if (sscanf(line, "ring %llx %u %llu %llu %c", &a, &ring, &b, &c, &extra) != 4) {
			snprintf(err, errlen, "%s:%u: cannot parse \"%.*s\" (want \"ring <instance hex> <ring> <pos> <rec_no>\")",
				 path, lineno, (int)strcspn(line, "\n"), line);
			ret = -EBADMSG;
			break;
		}
		cur.instance = a;
		cur.ring = ring;
		cur.pos = b;
		cur.rec_no = c;
		ret = cursor_tab_set(t, &cur);
		if (ret)
			break;
	}
	fclose(f);
	if (ret) {
		t->n = 0;
		t->seq = 0;
	}
	return ret;
}

static int fsync_dir_of(const char *path)
{
	char dir[4096];
	char *slash;
	int fd, ret = 0;

	snprintf(dir, sizeof(dir), "%s", path);
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

/* Write all of buf to fd. */
static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cursor_save(const char *path, const struct cursor_tab *t, int sync)
{
	char tmp[4096];
	char *buf;
	size_t cap = 128 + (size_t)t->n * 80, len = 0;
	int fd, ret;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	len += (size_t)snprintf(buf + len, cap - len, "%s\nseq %" PRIu64 "\n",
				CURSOR_FILE_HEADER, t->seq);
	for (uint32_t i = 0; i < t->n; i++)
		len += (size_t)snprintf(buf + len, cap - len,
					"ring %016" PRIx64 " %u %" PRIu64 " %" PRIu64 "\n",
					t->v[i].instance, t->v[i].ring, t->v[i].pos,
					t->v[i].rec_no);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = write_all(fd, buf, len);
	if (!ret && sync && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (!ret && sync)
		ret = fsync_dir_of(path);
	if (ret)
		unlink(tmp);
out:
	free(buf);
	return ret;
}

/* ---- spool ------------------------------------------------------------- */

static void ent_name(char *buf, size_t len, uint64_t seq)
{
	snprintf(buf, len, "%020" PRIu64 ".batch", seq);
}

static void list_insert_sorted(struct spool *sp, struct spool_ent *e)
{
	struct spool_ent *at = sp->head.prev;

	/* Usually appended at the end; the loader may insert in any order. */
	while (at != &sp->head && at->seq > e->seq)
		at = at->prev;
	e->prev = at;
	e->next = at->next;
	at->next->prev = e;
	at->next = e;
	sp->bytes += e->bytes;
	sp->nbatches++;
	if (e->seq > sp->max_seq)
		sp->max_seq = e->seq;
}

void spool_drop(struct spool *sp, struct spool_ent *e)
{
	char name[32];

	ent_name(name, sizeof(name), e->seq);
	if (unlinkat(sp->dfd, name, 0) && errno != ENOENT)
		pr_warn("spool: cannot remove %s/%s: %s", sp->dir, name, errstr(errno));
	e->prev->next = e->next;
	e->next->prev = e->prev;
	if (e->sent)
		sp->nsent--;
	if (e->acked)
		sp->nacked--;
	sp->bytes -= e->bytes;
	sp->nbatches--;
	free(e);
}

void spool_ack(struct spool *sp, struct spool_ent *e)
{
	if (e->acked)
		return;
	if (e->sent) {
		e->sent = 0;
		sp->nsent--;
	}
	if (e->seq <= sp->saved_seq) {
		spool_drop(sp, e);
		return;
	}
	e->acked = 1;
	sp->nacked++;
}

int spool_save_cursors(struct spool *sp)
{
	int ret = cursor_save(sp->cursor_path, sp->tab, sp->sync);

	if (ret)
		return ret;
	sp->saves++;
	sp->saved_seq = sp->tab->seq;
	sp->dirty = 0;
	for (struct spool_ent *e = spool_first(sp), *nx; e && e->seq <= sp->saved_seq; e = nx) {
		nx = spool_next(sp, e);
		if (e->acked)
			spool_drop(sp, e);
	}
	return 0;
}

void spool_forget(struct spool *sp, uint64_t instance)
{
	uint32_t n = sp->tab->n;

	cursor_tab_forget(sp->tab, instance);
	if (sp->tab->n != n)
		sp->dirty = 1;
}

struct spool_ent *spool_find(struct spool *sp, uint64_t seq)
{
	for (struct spool_ent *e = spool_first(sp); e; e = spool_next(sp, e))
		if (e->seq == seq)
			return e;
	return NULL;
}

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

int spool_open_ent(struct spool *sp, const struct spool_ent *e)
{
	char name[32];
	int fd;

	ent_name(name, sizeof(name), e->seq);
	fd = openat(sp->dfd, name, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

struct count_ctx {
	uint32_t n;
};

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
	if (crc != (uint32_t)crc32(0L, buf + off, (uInt)(len - off - 4))) {
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
		list_insert_sorted(sp, e);
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
		ent_name(name, sizeof(name), e->seq);
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

void spool_close(struct spool *sp)
{
	if (!sp)
		return;
	while (sp->head.next && sp->head.next != &sp->head) {
		struct spool_ent *e = sp->head.next;

		e->prev->next = e->next;
		e->next->prev = e->prev;
		free(e);
	}
	if (sp->dfd >= 0)
		close(sp->dfd);
	sp->dfd = -1;
	free(sp->dir);
	free(sp->cursor_path);
	sp->dir = sp->cursor_path = NULL;
}

int spool_put(struct spool *sp, const void *frame, uint32_t frame_len,
	      uint32_t nspans, const struct cursor *cur, uint32_t ncur)
{
	struct wire_hdr h;
	uint32_t magic = SPOOL_TRAILER_MAGIC, crc;
	uint64_t size = frame_len + 12 + (uint64_t)ncur * sizeof(*cur);
	char tmp[48], name[32];
	struct iovec iov[4];
	struct spool_ent *e;
	int fd, ret;
	uLong c;

	memcpy(&h, frame, sizeof(h));
	if (h.seq <= sp->max_seq || h.seq <= sp->tab->seq)
		return -EINVAL;
	/* The trailer's cursors must reach the table once the file is
	 * there: make room first. */
	ret = cursor_tab_reserve(sp->tab, ncur);
	if (ret)
		return ret;
	/* Make room: oldest first.  The batch being written always stays,
	 * even when it alone exceeds the bound.  A file may go only once the
	 * cursor file covers it (its trailer may hold the only copy of a
	 * ring's cursor). */
	while (sp->bytes + size > sp->max_bytes && spool_first(sp)) {
		struct spool_ent *old = spool_first(sp);

		if (old->seq > sp->saved_seq) {
			ret = spool_save_cursors(sp);
			if (ret)
				return ret;
			continue;
		}
		if (!old->acked) {
			pr_warn("spool: full (%" PRIu64 " of %" PRIu64 " bytes): evicting batch %" PRIu64
				" (%u spans lost)", sp->bytes, sp->max_bytes, old->seq, old->nspans);
			sp->evicted_batches++;
			sp->evicted_spans += old->nspans;
		}
		spool_drop(sp, old);
	}

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->seq = h.seq;
	e->bytes = size;
	e->frame_len = frame_len;
	e->nspans = nspans;

	c = crc32(0L, (const Bytef *)&magic, 4);
	c = crc32(c, (const Bytef *)&ncur, 4);
	if (ncur)
		c = crc32(c, (const Bytef *)cur, (uInt)(ncur * sizeof(*cur)));
	crc = (uint32_t)c;
	iov[0] = (struct iovec){ (void *)frame, frame_len };
	iov[1] = (struct iovec){ &magic, 4 };
	iov[2] = (struct iovec){ &ncur, 4 };
	iov[3] = (struct iovec){ (void *)cur, (size_t)ncur * sizeof(*cur) };

	snprintf(tmp, sizeof(tmp), "tmp-%" PRIu64, h.seq);
	ent_name(name, sizeof(name), h.seq);
	fd = openat(sp->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto err;
	}
	{
		size_t want = frame_len + 8 + (size_t)ncur * sizeof(*cur);
		ssize_t n = writev(fd, iov, 4);

		if (n < 0)
			ret = -errno;
		else if ((size_t)n != want)
			ret = -EIO; /* short write on a regular file: disk full */
		else
			ret = write_all(fd, &crc, 4);
	}
	if (!ret && sp->sync && fdatasync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && renameat(sp->dfd, tmp, sp->dfd, name))
		ret = -errno;
	if (!ret && sp->sync && fsync(sp->dfd))
		ret = -errno;
	if (ret) {
		unlinkat(sp->dfd, tmp, 0);
		goto err;
	}
	list_insert_sorted(sp, e);
	for (uint32_t i = 0; i < ncur; i++)
		cursor_tab_set(sp->tab, &cur[i]); /* reserved: cannot fail */
	sp->tab->seq = h.seq;
	sp->dirty = 1;
	return 0;
err:
	free(e);
	return ret;
}
