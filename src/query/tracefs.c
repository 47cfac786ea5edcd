// SPDX-License-Identifier: MIT
/*
 * Tracepoint formats: events/<sys>/<event>/format under tracefs gives each
 * field's C type, offset, size and signedness, so tp.prev_pid is checked
 * and typed at compile time and the back end knows where to load it.
 *
 * tracefs is looked for at /sys/kernel/tracing and
 * /sys/kernel/debug/tracing; when neither holds events/, it is mounted at
 * /sys/kernel/tracing (root only).  The query option 'tracefs' overrides
 * all that (tests use a directory of fixture formats).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/tracefs.h"
#include "query/query.h"
#include "query/query_int.h"

#define FORMAT_MAX	(64 * 1024)

/* The tracefs directory (the 'tracefs' option first); NULL with *err set. */
static const char *tracefs_dir(struct query *q, int *err)
{
	const char *dir;

	if (q->tracefs)
		return q->tracefs;
	dir = tracefs_find();
	if (!dir)
		*err = -errno;
	return dir;
}

/* One format line into f (names and types copied into the arena).
 * Returns 1 for a field, 0 for another line, -EINVAL or -ENOMEM. */
static int parse_field(struct arena *a, char *line, struct tp_field *f)
{
	struct tracefs_field tf;
	int r = tracefs_parse_field(line, &tf);

	if (r <= 0)
		return r;
	f->name = arena_strndup(a, tf.name, strlen(tf.name));
	f->ctype = arena_strndup(a, tf.ctype, strlen(tf.ctype));
	if (!f->name || !f->ctype)
		return -ENOMEM;
	f->offset = tf.offset;
	f->size = tf.size;
	f->is_signed = tf.is_signed;
	f->is_string = tf.is_string;
	f->data_loc = tf.data_loc;
	f->is_array = tf.is_array;
	return 1;
}

static int parse_format(struct query *q, char *text, struct tp_format *fmt)
{
	struct tp_field buf[128];
	int n = 0, r;

	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strncmp(line, "ID:", 3))
			fmt->id = atoi(line + 3);
		if (n == (int)ARRAY_SIZE(buf))
			break;
		memset(&buf[n], 0, sizeof(buf[n]));
		r = parse_field(q->arena, line, &buf[n]);
		if (r < 0)
			return r;
		n += r;
	}
	fmt->fields = arena_alloc(q->arena, (n ? n : 1) * sizeof(*buf));
	if (!fmt->fields)
		return -ENOMEM;
	memcpy(fmt->fields, buf, n * sizeof(*buf));
	fmt->nfields = n;
	return 0;
}

int tp_format_load(struct query *q, const char *sys, const char *event,
		   const struct loc *loc, const struct tp_format **out)
{
	struct tp_format *fmt;
	const char *dir;
	char path[1024], *text;
	int err = 0, fd;
	ssize_t len;

	for (int i = 0; i < q->ntps; i++)
		if (!strcmp(q->tps[i]->sys, sys) && !strcmp(q->tps[i]->event, event)) {
			*out = q->tps[i];
			return 0;
		}
	dir = tracefs_dir(q, &err);
	if (!dir)
		return query_errorf(q, loc,
				    "cannot read the format of tracepoint '%s:%s': tracefs is not mounted and mounting it at %s failed: %s (run as root, or: mount -t tracefs nodev %s)",
				    sys, event, TRACEFS_DIR, errstr(err), TRACEFS_DIR);
	snprintf(path, sizeof(path), "%s/events/%s/%s/format", dir, sys, event);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return query_errorf(q, loc, "unknown tracepoint '%s:%s' (no %s)",
					    sys, event, path);
		return query_errorf(q, loc, "cannot read %s: %s%s", path,
				    errstr(errno),
				    errno == EACCES ? " (tracepoint formats need root)" : "");
	}
	text = arena_alloc(q->arena, FORMAT_MAX + 1);
	if (!text) {
		close(fd);
		return -ENOMEM;
	}
	len = read(fd, text, FORMAT_MAX);	/* tracefs gives it in one read */
	err = errno;
	close(fd);
	if (len < 0)
		return query_errorf(q, loc, "cannot read %s: %s", path, errstr(err));
	text[len] = '\0';

	fmt = arena_alloc(q->arena, sizeof(*fmt));
	if (!fmt)
		return -ENOMEM;
	fmt->sys = sys;
	fmt->event = event;
	err = parse_format(q, text, fmt);
	if (err == -ENOMEM)
		return err;
	if (err || !fmt->nfields)
		return query_errorf(q, loc, "cannot understand %s (no 'field:' lines)",
				    path);

	struct tp_format **tps = arena_alloc(q->arena, (q->ntps + 1) * sizeof(*tps));

	if (!tps)
		return -ENOMEM;
	if (q->ntps)
		memcpy(tps, q->tps, q->ntps * sizeof(*tps));
	tps[q->ntps++] = fmt;
	q->tps = tps;
	*out = fmt;
	return 0;
}

const struct tp_field *tp_field_find(const struct tp_format *f, const char *name)
{
	for (int i = 0; i < f->nfields; i++)
		if (!strcmp(f->fields[i].name, name))
			return &f->fields[i];
	return NULL;
}

int tp_syscall_known(struct query *q, const char *name)
{
	const char *dir = q->tracefs;
	char path[512];
	struct stat st;

	if (!dir)
		dir = tracefs_has_events(TRACEFS_DIR) ? TRACEFS_DIR :
		      tracefs_has_events(TRACEFS_DEBUGFS_DIR) ? TRACEFS_DEBUGFS_DIR : NULL;
	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/events/syscalls", dir);
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return -1;
	snprintf(path, sizeof(path), "%s/events/syscalls/sys_enter_%s", dir, name);
	return !stat(path, &st);
}

/* ---- wildcards ------------------------------------------------------------ */

struct tp_glob {
	struct query *q;
	struct ast_source *src;
	const struct loc *loc;
	bool full;		/* names are "sys:event" */
	struct tp_format *common;
	int i;
};

static bool field_same(const struct tp_field *a, const struct tp_field *b)
{
	return a->offset == b->offset && a->size == b->size &&
	       a->is_signed == b->is_signed && !strcmp(a->ctype, b->ctype);
}

/* One matched event: its name, and the common fields narrowed to its. */
static int tp_glob_one(const char *sys, const char *event, void *arg)
{
	struct tp_glob *g = arg;
	const struct tp_format *f;
	const char *name;
	int err, k = 0;

	if (!(sys = arena_strndup(g->q->arena, sys, strlen(sys))) ||
	    !(event = arena_strndup(g->q->arena, event, strlen(event))))
		return -ENOMEM;
	err = tp_format_load(g->q, sys, event, g->loc, &f);
	if (err)
		return err;
	name = g->full ? arena_printf(g->q->arena, "%s:%s", sys, event) : event;
	if (!name)
		return -ENOMEM;
	g->src->names[g->i++] = name;
	if (!g->common) {
		if (!(g->common = arena_alloc(g->q->arena, sizeof(*g->common))) ||
		    !(g->common->fields = arena_alloc(g->q->arena, (f->nfields + 1) *
						      sizeof(*f->fields))))
			return -ENOMEM;
		memcpy(g->common->fields, f->fields, f->nfields * sizeof(*f->fields));
		g->common->nfields = f->nfields;
		return 0;
	}
	for (int i = 0; i < g->common->nfields; i++) {
		const struct tp_field *o = tp_field_find(f, g->common->fields[i].name);

		if (o && field_same(o, &g->common->fields[i]))
			g->common->fields[k++] = g->common->fields[i];
	}
	g->common->nfields = k;
	return 0;
}

int tp_glob_load(struct query *q, struct ast_source *src, const struct loc *loc)
{
	struct tp_glob g = { q, src, loc, strpbrk(src->part[0], "*?[") != NULL, NULL, 0 };
	const char *dir;
	int err = 0, n;

	dir = tracefs_dir(q, &err);
	if (!dir)
		return query_errorf(q, loc,
				    "cannot list the tracepoints matching \"%s\": tracefs is not mounted and mounting it at %s failed: %s (run as root, or: mount -t tracefs nodev %s)",
				    src->arg, TRACEFS_DIR, errstr(err), TRACEFS_DIR);
	err = tracefs_glob(dir, src->part[0], src->part[1], NULL, NULL, &n);
	if (err == -E2BIG)
		return query_errorf(q, loc,
				    "tracepoint(\"%s\") matches %d events, more than the %d one query attaches to: name fewer",
				    src->arg, n, TRACEFS_GLOB_MAX);
	if (err < 0)
		return query_errorf(q, loc, "cannot list the tracepoints matching \"%s\" in %s: %s",
				    src->arg, dir, errstr(err));
	if (!n)
		return query_errorf(q, loc,
				    "no tracepoint matches \"%s\" in %s/available_events (see `fay probes '%s'`)",
				    src->arg, dir, src->arg);
	if (!(src->names = arena_alloc(q->arena, (size_t)n * sizeof(*src->names))))
		return -ENOMEM;
	src->nnames = n;
	err = tracefs_glob(dir, src->part[0], src->part[1], tp_glob_one, &g, &n);
	if (err < 0)
		return err == -ENOMEM || err == -EINVAL ? err :
		       query_errorf(q, loc, "cannot list the tracepoints matching \"%s\" in %s: %s",
				    src->arg, dir, errstr(err));
	if (g.i != src->nnames)
		return query_errorf(q, loc, "the tracepoints matching \"%s\" changed while they were read: try again",
				    src->arg);
	g.common->sys = src->part[0];
	g.common->event = src->part[1];
	g.common->id = -1;
	src->tp = g.common;
	return 0;
}
