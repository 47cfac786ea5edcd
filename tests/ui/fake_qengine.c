// SPDX-License-Identifier: MIT
/*
 * A stand-in for the query engine, linked only into the test binary
 * $(B)/tests/fay-ui-fakeq (mk/ui.mk), never into fay: it defines the weak
 * hook of src/engine/qengine.h so the UI test can watch the streaming
 * path of POST /api/query (thread, pipe, chunked NDJSON, the browser
 * reading rows as they come) before src/bpf runs queries for real.
 *
 * It emits FAKEQ_ROWS rows 100 ms apart (or, for a query with `window`,
 * FAKEQ_ROWS windows of 3 rows), with values made from the row number in
 * the plan's columns: ints i * (column + 1), strings "row-i".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/qengine.h"

#define FAKEQ_ROWS 12

/* One row as a JSON array into buf (len bytes).  Returns chars written. */
static int row_json(const struct plan *p, int i, char *buf, size_t len)
{
	int n = snprintf(buf, len, "[");

	for (int c = 0; c < p->ncols && (size_t)n < len; c++) {
		if (p->cols[c].type == VT_STR)
			n += snprintf(buf + n, len - (size_t)n, "%s\"row-%d\"", c ? "," : "", i);
		else
			n += snprintf(buf + n, len - (size_t)n, "%s%d", c ? "," : "", i * (c + 1));
	}
	n += snprintf(buf + n, len - (size_t)n, "]");
	return n;
}

int fay_query_engine_run(struct query *q, const struct plan *p,
			 const struct qengine_env *env, char *err, size_t errlen)
{
	struct timespec ts = { 0, 100 * 1000000 };
	char line[4096], row[1024];
	int ret;

	for (int i = 1; i <= FAKEQ_ROWS && !*env->stop; i++) {
		nanosleep(&ts, NULL);
		if (p->window_ns) {
			struct timespec now;
			int n;

			clock_gettime(CLOCK_REALTIME, &now);
			n = snprintf(line, sizeof(line), "{\"type\":\"window\",\"t\":%lld,\"rows\":[",
				     (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
			for (int k = 0; k < 3; k++) {
				row_json(p, i + k, row, sizeof(row));
				n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%s", k ? "," : "", row);
			}
			snprintf(line + n, sizeof(line) - (size_t)n, "]}");
		} else {
			row_json(p, i, row, sizeof(row));
			snprintf(line, sizeof(line), "{\"type\":\"row\",\"values\":%s}", row);
		}
		ret = env->emit(env->ctx, line, strlen(line));
		if (ret)
			return ret;
	}
	if (*env->stop) {
		snprintf(err, errlen, "stopped");
		return -EINTR;
	}
	return 0;
}
