// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store: store__put_windows(), one INSERT of RowBinary
 * rows into query_windows (the Distributed table with a cluster, sent
 * with insert_distributed_sync=1) on a connection of its own, so a
 * standing query's thread never waits for the span writers.  A window
 * sent again has the same key (name, end_us, host): ReplacingMergeTree
 * keeps the newest written_us, and readers read FINAL (store/windows.c).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "store/ch_int.h"

#define CH_WINDOW_COLS "day, name, start_us, end_us, host, answer, asked, answered," \
	" missing, provisional, amended, written_us"

static void put_window(struct wbuf *b, const struct store_window *w)
{
	const char *missing = w->missing ? w->missing : "[]";

	ch_put_le16(b, ch_day(w->end_us));
	ch_put_str(b, w->name, strlen(w->name));
	wbuf_le64(b, w->start_us);
	wbuf_le64(b, w->end_us);
	ch_put_str(b, w->host, strlen(w->host));
	ch_put_str(b, w->answer, strlen(w->answer));
	wbuf_le32(b, w->asked);
	wbuf_le32(b, w->answered);
	ch_put_str(b, missing, strlen(missing));
	wbuf_u8(b, w->provisional);
	wbuf_u8(b, w->amended);
	wbuf_le64(b, w->written_us);
}

int ch__put_windows(struct store_be *st, const struct store_window *w, size_t n,
		    char *err, size_t errlen)
{
	struct wbuf b = { 0 };
	int ret;

	for (size_t i = 0; i < n; i++)
		put_window(&b, &w[i]);
	if (b.err) {
		wbuf_free(&b);
		return -ENOMEM;
	}
	pthread_mutex_lock(&st->qlock);
	ret = ch_insert(st->qc, "INSERT INTO query_windows (" CH_WINDOW_COLS ") FORMAT RowBinary",
			b.p, b.len, err, errlen);
	pthread_mutex_unlock(&st->qlock);
	wbuf_free(&b);
	return ret;
}
