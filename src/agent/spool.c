// SPDX-License-Identifier: MIT
/*
 * The agent's durable state: the spool of unacknowledged batches
 * (state-dir/spool/<seq>.batch) and the ring cursor file
 * (state-dir/cursors).  See the protocol in agent.h and docs/ABI.md.
 *
 * This file: the spool while the agent runs (a batch written, ACKed,
 * dropped; the cursor file saved through it).  spool_load.c reads the
 * spool back at start, spool_cursor.c holds the cursor table and file;
 * the spool file format is in spool_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/spool_int.h"
#include "common/file_atomic.h"
#include "common/wire.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/zlib.h"

/* ---- spool ------------------------------------------------------------- */

void spool_ent_name(char *buf, size_t len, uint64_t seq)
{
	snprintf(buf, len, "%020" PRIu64 ".batch", seq);
}

void spool_list_insert_sorted(struct spool *sp, struct spool_ent *e)
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

	spool_ent_name(name, sizeof(name), e->seq);
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

int spool_open_ent(struct spool *sp, const struct spool_ent *e)
{
	char name[32];
	int fd;

	spool_ent_name(name, sizeof(name), e->seq);
	fd = openat(sp->dfd, name, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
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
	uint32_t c;

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

	c = crc32_of(0, &magic, 4);
	c = crc32_of(c, &ncur, 4);
	if (ncur)
		c = crc32_of(c, cur, ncur * sizeof(*cur));
	crc = c;
	iov[0] = (struct iovec){ (void *)frame, frame_len };
	iov[1] = (struct iovec){ &magic, 4 };
	iov[2] = (struct iovec){ &ncur, 4 };
	iov[3] = (struct iovec){ (void *)cur, (size_t)ncur * sizeof(*cur) };

	/* a name nobody can guess, made here or not at all: nothing planted
	 * in the directory (a link to a file this agent may write) is
	 * followed or truncated (spool_load.c removes tmp-* at start) */
	snprintf(tmp, sizeof(tmp), "tmp-%" PRIu64 "-%016" PRIx64, h.seq, rand_u64());
	spool_ent_name(name, sizeof(name), h.seq);
	fd = openat(sp->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
			ret = file_write_all(fd, &crc, 4);
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
	spool_list_insert_sorted(sp, e);
	for (uint32_t i = 0; i < ncur; i++)
		cursor_tab_set(sp->tab, &cur[i]); /* reserved: cannot fail */
	sp->tab->seq = h.seq;
	sp->dirty = 1;
	return 0;
err:
	free(e);
	return ret;
}
