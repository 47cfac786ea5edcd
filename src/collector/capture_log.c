// SPDX-License-Identifier: MIT
/*
 * The list of captures on disk (#22): DIR/captures.jsonl beside the
 * capture rules' rules.json, one capture's account a line, so that GET
 * /api/captures (and the UI) lists after a restart what was captured
 * before it.  An account is appended when its capture is made and again
 * each time a follow round changes it (late spans; its last round): the
 * last line of an id is the account.  Appending costs one write(2) of a
 * line; the file is rewritten whole (file_write_atomic(), the newest
 * CAPTURES_KEEP accounts) at the start and when it reaches 4 x
 * CAPTURES_KEEP lines.  A torn last line (a crash mid-write) is skipped
 * when read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/http_int.h"
#include "common/file_atomic.h"
#include "common/log.h"

struct caplog {
	char dir[4096];
	char path[4200];
	int fd;
	unsigned lines;
	int warned;
};

/* Newest first: at_ms descending. */
static int by_at_desc(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "at_ms"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "at_ms"));

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Rewrite the file with the accounts of list (newest first), oldest
 * first, and open it for appending.  Under captures_lock (or alone). */
static int rewrite(struct caplog *l, json_t *list)
{
	size_t n = json_array_size(list), len = 0, cap = 0;
	char *buf = NULL;
	int ret;

	for (size_t i = n; i-- > 0;) {
		char *line = json_dumps(json_array_get(list, i), JSON_COMPACT);
		size_t ll = line ? strlen(line) : 0;

		if (line && len + ll + 2 > cap) {
			char *nb = realloc(buf, (len + ll + 2) * 2);

			if (nb) {
				buf = nb;
				cap = (len + ll + 2) * 2;
			}
		}
		if (!line || len + ll + 2 > cap) {
			free(line);
			free(buf);
			return -ENOMEM;
		}
		memcpy(buf + len, line, ll);
		len += ll;
		buf[len++] = '\n';
		free(line);
	}
	ret = file_write_atomic(l->path, buf ? buf : "", len, 0600, 0);
	free(buf);
	if (ret)
		return ret;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = open(l->path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (l->fd < 0)
		return -errno;
	l->lines = (unsigned)n;
	return 0;
}

/* The accounts of the file, the last line of each id, newest first, at
 * most CAPTURES_KEEP.  NULL: out of memory. */
static json_t *load(const char *path, unsigned *bad)
{
	json_t *byid = json_object(), *list = json_array(), *v, **arr = NULL;
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t lcap = 0, n = 0;
	const char *id;
	ssize_t len;

	*bad = 0;
	if (!byid || !list)
		goto fail;
	while (f && (len = getline(&line, &lcap, f)) > 0) {
		json_t *o = json_loadb(line, (size_t)len, 0, NULL);

		id = json_string_value(json_object_get(o, "id"));
		if (!id || !json_is_integer(json_object_get(o, "at_ms"))) {
			++*bad;
			json_decref(o);
			continue;
		}
		json_object_set_new(byid, id, o);
	}
	free(line);
	if (f)
		fclose(f);
	arr = calloc(json_object_size(byid) + 1, sizeof(*arr));
	if (!arr)
		goto fail;
	json_object_foreach(byid, id, v)
		arr[n++] = v;
	qsort(arr, n, sizeof(*arr), by_at_desc);
	for (size_t i = 0; i < n && i < CAPTURES_KEEP; i++) {
		/* a follow the collector stopped before its end */
		if (json_is_true(json_object_get(arr[i], "following"))) {
			json_object_set_new(arr[i], "following", json_false());
			json_object_set_new(arr[i], "follow_cut", json_string(
				"the collector stopped before the follow's end"));
		}
		json_array_append(list, arr[i]);
	}
	free(arr);
	json_decref(byid);
	return list;
fail:
	json_decref(byid);
	json_decref(list);
	return NULL;
}

int caplog_open(struct collector *c, const char *dir, char *err, size_t errlen)
{
	struct caplog *l = calloc(1, sizeof(*l));
	json_t *list;
	unsigned bad;
	int ret;

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->fd = -1;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-ret));
		free(l);
		return ret;
	}
	snprintf(l->dir, sizeof(l->dir), "%s", dir);
	snprintf(l->path, sizeof(l->path), "%s/captures.jsonl", dir);
	list = load(l->path, &bad);
	if (!list) {
		free(l);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (bad)
		pr_warn("%s: %u lines that are not a capture's account skipped", l->path, bad);
	ret = rewrite(l, list);
	if (ret) {
		snprintf(err, errlen, "%s: %s", l->path, strerror(-ret));
		json_decref(list);
		free(l);
		return ret;
	}
	pthread_mutex_lock(&c->captures_lock);
	json_decref(c->captures);
	c->captures = list;
	c->caplog = l;
	pthread_mutex_unlock(&c->captures_lock);
	return 0;
}

void caplog_put(struct collector *c, json_t *acc)
{
	struct caplog *l = c->caplog;
	char *line;
	int ret;

	if (!l)
		return;
	if (l->lines >= 4 * CAPTURES_KEEP) {
		ret = c->captures ? rewrite(l, c->captures) : -ENOMEM;
		if (ret && !l->warned++)
			pr_warn("%s: not rewritten: %s", l->path, strerror(-ret));
		return;	/* acc is in c->captures: the rewrite wrote it */
	}
	line = json_dumps(acc, JSON_COMPACT);
	if (line) {	/* one write: a crash tears at most the last line */
		size_t len = strlen(line);
		char *nl = realloc(line, len + 2);

		if (nl) {
			line = nl;
			memcpy(line + len, "\n", 2);
		}
		ret = nl && l->fd >= 0 ? file_write_all(l->fd, line, len + 1) : -ENOMEM;
	} else {
		ret = -ENOMEM;
	}
	free(line);
	if (ret && !l->warned++)
		pr_warn("%s: a capture not written: %s", l->path, strerror(-ret));
	l->lines += !ret;
}

void caplog_close(struct collector *c)
{
	if (!c->caplog)
		return;
	if (c->caplog->fd >= 0)
		close(c->caplog->fd);
	free(c->caplog);
	c->caplog = NULL;
}

int caplog_events_path(struct collector *c, const char *id, char *out, size_t len)
{
	const char *dash = strchr(id, '-');

	if (!dash || dash == id || !dash[1] || strspn(id, "0123456789") != (size_t)(dash - id) ||
	    strspn(dash + 1, "0123456789") != strlen(dash + 1))
		return -EINVAL;
	if (!c->caplog)
		return -ENOENT;
	snprintf(out, len, "%s/%s.events.jsonl", c->caplog->dir, id);
	return 0;
}
