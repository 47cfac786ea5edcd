// SPDX-License-Identifier: MIT
/*
 * The store's disk watermark (store.h, "the disk watermark"): when new
 * spans may be written, decided from the backend's disk (store_ops.space)
 * or, for a backend whose disk is elsewhere, from its disk-full errors.
 *
 * Why a watermark and not just the write's failure: SQLite in WAL mode
 * writes every commit into the WAL, and the WAL is copied into the
 * database by a checkpoint that needs room for the pages it adds.  A disk
 * that fills with WAL frames leaves no room for the checkpoint, and the
 * space freed later is taken by the next commits' frames again: with the
 * store on a 16 MiB file system, 25,604 of 42,600 spans stayed stored
 * only in a 16.7 MB WAL beside a 4 KiB database, and ingest never
 * resumed (#20).  Stopping before the disk is full keeps that room.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "store/backend.h"

#define DW_CHECK_NS   200000000ull    /* statvfs at most this often */
#define DW_RETRY_NS   1000000000ull   /* disk_low() again, a probe write */
#define DW_PCT_DEFAULT 2
#define DW_HYST_DIV   8               /* back at the watermark + 1/8 */

void store_dw_init(struct store_dw *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
}

void store_dw_free(struct store_dw *w)
{
	pthread_mutex_destroy(&w->lock);
}

/* "12.3 MiB" into buf. */
static const char *mib(char *buf, size_t len, uint64_t bytes)
{
	snprintf(buf, len, "%.1f MiB", (double)bytes / (1 << 20));
	return buf;
}

/* The watermark for sp: --min-free, else the default (store.h). */
static uint64_t watermark(const struct store_dw *w, const struct store_space *sp)
{
	uint64_t pct;

	if (w->min_pct)
		return sp->total / 100 * w->min_pct;
	if (w->min_bytes)
		return w->min_bytes;
	pct = sp->total / 100 * DW_PCT_DEFAULT;
	return pct > 2 * sp->wal_limit ? pct : 2 * sp->wal_limit;
}

/* Look at the disk again (w->lock held). */
static void check(struct store_dw *w, const struct store_ops *ops, struct store_be *be,
		  uint64_t now)
{
	struct store_space sp = { 0 };
	uint64_t need;
	char a[32], b[32], t[32];

	w->checked_ns = now;
	if (!ops->space) {
		/* the backend's errors decide (store_dw_wrote()) */
		if (w->full && !w->low) {
			w->low = 1;
			pr_warn("store: %s; refusing new spans (agents keep them, HTTP senders "
				"retry) until a write succeeds again", w->why);
		}
		return;
	}
	if (ops->space(be, &sp))
		return;   /* the state stays as it was */
	w->total = sp.total;
	w->avail = sp.avail;
	w->charged = 0;
	w->min_free = watermark(w, &sp);
	need = w->min_free > sp.wal ? w->min_free : sp.wal;
	w->need = need;
	if (!w->low && (sp.avail < need || w->full)) {
		w->low = 1;
		if (sp.avail < need)
			snprintf(w->why, sizeof(w->why), "disk low: %s free of %s, below the %s "
				 "kept free%s", mib(a, sizeof(a), sp.avail), mib(t, sizeof(t), sp.total),
				 mib(b, sizeof(b), need), need == w->min_free ? " (--min-free)" :
				 " (the WAL not yet checkpointed)");
		pr_warn("store: %s; refusing new spans (agents keep them, HTTP senders retry) "
			"and checkpointing until the space is back", w->why);
		w->freed_ns = now;
		if (ops->disk_low)
			ops->disk_low(be);
	} else if (w->low && sp.avail >= need + need / DW_HYST_DIV) {
		w->low = w->full = 0;
		pr_info("store: disk space back: %s free, %s kept free; taking spans again",
			mib(a, sizeof(a), sp.avail), mib(b, sizeof(b), need));
	} else if (w->low && now >= w->freed_ns + DW_RETRY_NS) {
		w->freed_ns = now;
		if (ops->disk_low)
			ops->disk_low(be);
	}
	if (w->low && !w->full && sp.avail < need)
		snprintf(w->why, sizeof(w->why), "disk low: %s free of %s, below the %s kept "
			 "free%s", mib(a, sizeof(a), sp.avail), mib(t, sizeof(t), sp.total),
			 mib(b, sizeof(b), need), need == w->min_free ? " (--min-free)" :
			 " (the WAL not yet checkpointed)");
}

int store_dw_gate(struct store_dw *w, const struct store_ops *ops, struct store_be *be,
		  char *err, size_t errlen)
{
	uint64_t now = clock_monotonic_ns();
	int ret = 0;

	pthread_mutex_lock(&w->lock);
	if (now >= w->checked_ns + DW_CHECK_NS)
		check(w, ops, be, now);
	if (w->low) {
		/* no disk to look at: one write a second finds out */
		if (!ops->space && now >= w->probe_ns) {
			w->probe_ns = now + DW_RETRY_NS;
		} else {
			snprintf(err, errlen, "%s", w->why);
			ret = -ENOSPC;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return ret;
}

void store_dw_wrote(struct store_dw *w, const struct store_ops *ops, int ret,
		    const char *err, uint64_t bytes)
{
	if (ret == 0 && ops->space) {
		/* the room the last look saw, less this write: near the
		 * watermark (another write like it would pass) look again
		 * at the next gate instead of 200 ms later */
		pthread_mutex_lock(&w->lock);
		w->charged += bytes;
		if (w->avail < w->charged + 2 * w->need + 2 * bytes)
			w->checked_ns = 0;
		pthread_mutex_unlock(&w->lock);
		return;
	}
	if (ret != -ENOSPC && (ret || ops->space || !w->low))
		return;
	pthread_mutex_lock(&w->lock);
	if (ret == -ENOSPC) {
		if (!w->full || !w->low)
			snprintf(w->why, sizeof(w->why), "disk low: %s", err && *err ? err :
				 "no space left on the store's device");
		w->full = 1;
		w->checked_ns = 0;   /* the next gate looks at once */
	} else if (!ops->space && w->low) {
		w->low = w->full = 0;
		pr_info("store: a write succeeded: the disk is no longer full; taking spans "
			"again");
	}
	pthread_mutex_unlock(&w->lock);
}

void store_dw_get(struct store_dw *w, const struct store_ops *ops, struct store_be *be,
		  struct store_disk *d)
{
	uint64_t now = clock_monotonic_ns();

	pthread_mutex_lock(&w->lock);
	if (now >= w->checked_ns + DW_CHECK_NS)
		check(w, ops, be, now);
	d->low = w->low;
	d->total = w->total;
	d->avail = w->avail;
	d->min_free = w->min_free;
	snprintf(d->why, sizeof(d->why), "%s", w->low ? w->why : "");
	pthread_mutex_unlock(&w->lock);
}

uint64_t store_dw_room(struct store_dw *w, const struct store_ops *ops)
{
	uint64_t room;

	if (!ops->space)
		return UINT64_MAX;
	pthread_mutex_lock(&w->lock);
	if (!w->total)
		room = UINT64_MAX;   /* not looked at yet, or no statvfs */
	else
		room = w->low || w->avail <= w->min_free + w->charged ? 0 :
		       w->avail - w->min_free - w->charged;
	pthread_mutex_unlock(&w->lock);
	return room;
}
