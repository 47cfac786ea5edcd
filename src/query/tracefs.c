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
#include "query/query.h"
#include "query/query_int.h"

#define TRACEFS		"/sys/kernel/tracing"
#define DEBUGFS_TRACING	"/sys/kernel/debug/tracing"
#define FORMAT_MAX	(64 * 1024)

static bool has_events(const char *dir)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/events", dir);
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* The tracefs directory, mounting it if needed; NULL with *why set. */
static const char *tracefs_dir(struct query *q, int *err)
{
	if (q->tracefs)
		return q->tracefs;
	if (has_events(TRACEFS))
		return TRACEFS;
	if (has_events(DEBUGFS_TRACING))
		return DEBUGFS_TRACING;
	if (mount("nodev", TRACEFS, "tracefs", 0, NULL) == 0 && has_events(TRACEFS))
		return TRACEFS;
	*err = errno ? -errno : -ENOENT;
	return NULL;
}

/*
 * One "field:TYPE NAME;\toffset:O;\tsize:S;\tsigned:G;" line into f.
 * Returns 1 for a field, 0 for another line, -EINVAL for a malformed one.
 */
static int parse_field(struct arena *a, char *line, struct tp_field *f)
{
	char *decl, *semi, *name, *br, *p;
	int off, size, sgn;

	p = strstr(line, "field:");
	if (!p)
		return 0;
	decl = p + 6;
	semi = strchr(decl, ';');
	if (!semi)
		return -EINVAL;
	*semi = '\0';
	p = strstr(semi + 1, "offset:");
	if (!p || sscanf(p, "offset:%d;", &off) != 1)
		return -EINVAL;
	p = strstr(p, "size:");
	if (!p || sscanf(p, "size:%d;", &size) != 1)
		return -EINVAL;
	p = strstr(p, "signed:");
	if (!p || sscanf(p, "signed:%d;", &sgn) != 1)
		return -EINVAL;

	/* the name is the last word of the declaration, before a trailing
	 * [N] ("char prev_comm[16]"; but "__data_loc char[] filename") */
	size_t dl = strlen(decl);

	while (dl && decl[dl - 1] == ' ')
		decl[--dl] = '\0';
	br = dl && decl[dl - 1] == ']' ? strrchr(decl, '[') : NULL;
	name = br ? br : decl + dl;
	while (name > decl && name[-1] == ' ')
		name--;
	char *end = name;

	while (name > decl && name[-1] != ' ' && name[-1] != '*')
		name--;
	if (name == end)
		return -EINVAL;
	f->name = arena_strndup(a, name, end - name);
	/* the type: the declaration without the name */
	int tl = (int)(name - decl);

	while (tl && decl[tl - 1] == ' ')
		tl--;
	f->ctype = br ? arena_printf(a, "%.*s%s", tl, decl, br) :
			arena_strndup(a, decl, tl);
	if (!f->name || !f->ctype)
		return -ENOMEM;
	f->offset = off;
	f->size = size;
	f->is_signed = sgn;
	f->data_loc = !strncmp(decl, "__data_loc", 10);
	if (f->data_loc) {
		f->is_string = strstr(decl, "char") != NULL;
		f->is_array = !f->is_string;
	} else if (br) {
		f->is_string = strstr(decl, "char") != NULL && size > 0;
		f->is_array = !f->is_string;
	}
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
				    sys, event, TRACEFS, errstr(err), TRACEFS);
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
		dir = has_events(TRACEFS) ? TRACEFS :
		      has_events(DEBUGFS_TRACING) ? DEBUGFS_TRACING : NULL;
	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/events/syscalls", dir);
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return -1;
	snprintf(path, sizeof(path), "%s/events/syscalls/sys_enter_%s", dir, name);
	return !stat(path, &st);
}
