// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tracefs.h"

bool tracefs_has_events(const char *dir)
{
	char path[512];
	int fd;

	/* open(), not access(): access() checks the real uid without the
	 * capabilities, so a non-root fay with CAP_DAC_READ_SEARCH (the
	 * systemd units in dist/) would be told no and try to mount. */
	snprintf(path, sizeof(path), "%s/events", dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

const char *tracefs_find(void)
{
	if (tracefs_has_events(TRACEFS_DIR))
		return TRACEFS_DIR;
	if (tracefs_has_events(TRACEFS_DEBUGFS_DIR))
		return TRACEFS_DEBUGFS_DIR;
	errno = 0;
	if (mount("nodev", TRACEFS_DIR, "tracefs", 0, NULL) == 0 &&
	    tracefs_has_events(TRACEFS_DIR))
		return TRACEFS_DIR;
	if (!errno)
		errno = ENOENT;
	return NULL;
}

int tracefs_parse_field(char *line, struct tracefs_field *f)
{
	char *decl, *semi, *name, *br, *end, *p;
	size_t dl;
	int tl;

	p = strstr(line, "field:");
	if (!p)
		return 0;
	memset(f, 0, sizeof(*f));
	decl = p + 6;
	semi = strchr(decl, ';');
	if (!semi)
		return -EINVAL;
	*semi = '\0';
	p = strstr(semi + 1, "offset:");
	if (!p || sscanf(p, "offset:%d;", &f->offset) != 1)
		return -EINVAL;
	p = strstr(p, "size:");
	if (!p || sscanf(p, "size:%d;", &f->size) != 1)
		return -EINVAL;
	p = strstr(p, "signed:");
	if (!p || sscanf(p, "signed:%d;", &tl) != 1)
		return -EINVAL;
	f->is_signed = tl != 0;

	/* The name is the last word of the declaration, before a trailing
	 * [N] ("char prev_comm[16]"; but "__data_loc char[] filename"). */
	while (*decl == ' ' || *decl == '\t')
		decl++;
	dl = strlen(decl);
	while (dl && decl[dl - 1] == ' ')
		decl[--dl] = '\0';
	br = dl && decl[dl - 1] == ']' ? strrchr(decl, '[') : NULL;
	name = br ? br : decl + dl;
	while (name > decl && name[-1] == ' ')
		name--;
	end = name;
	while (name > decl && name[-1] != ' ' && name[-1] != '*')
		name--;
	if (name == end || (size_t)(end - name) >= sizeof(f->name))
		return -EINVAL;
	memcpy(f->name, name, (size_t)(end - name));
	/* the type: the declaration without the name */
	tl = (int)(name - decl);
	while (tl && decl[tl - 1] == ' ')
		tl--;
	snprintf(f->ctype, sizeof(f->ctype), "%.*s%s", tl, decl, br ? br : "");
	f->data_loc = !strncmp(decl, "__data_loc", 10);
	if (f->data_loc) {
		f->is_string = strstr(decl, "char") != NULL;
		f->is_array = !f->is_string;
	} else if (br) {
		f->is_string = strstr(decl, "char") != NULL && f->size > 0;
		f->is_array = !f->is_string;
	}
	return 1;
}

/* ---- wildcards ------------------------------------------------------------ */

struct tglob {
	char **v;
	size_t n, cap;
	char **dyn;		/* dynamic events, "sys:event", sorted */
	size_t ndyn, dcap;
};

static int names_add(char ***v, size_t *n, size_t *cap, const char *s)
{
	char *d;

	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		char **nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	if (!(d = strdup(s)))
		return -ENOMEM;
	(*v)[(*n)++] = d;
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* dynamic_events lines: "p:kprobes/myprobe vfs_read", "s:synthetic/x ...". */
static int read_dynamic(const char *dir, struct tglob *g)
{
	char path[512], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/dynamic_events", dir);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *sl, *end;

		if (!c || !(sl = strchr(c, '/')))
			continue;
		end = sl + strcspn(sl, " \t\n");
		*end = '\0';
		*sl = ':';
		if (names_add(&g->dyn, &g->ndyn, &g->dcap, c + 1)) {
			fclose(f);
			return -ENOMEM;
		}
	}
	fclose(f);
	if (g->ndyn)
		qsort(g->dyn, g->ndyn, sizeof(*g->dyn), names_cmp);
	return 0;
}

static int consider(struct tglob *g, const char *sys, const char *ev,
		    const char *sys_pat, const char *ev_pat)
{
	char name[512];
	const char *key = name;

	if (!strcmp(sys, "ftrace") || fnmatch(sys_pat, sys, 0) || fnmatch(ev_pat, ev, 0))
		return 0;
	snprintf(name, sizeof(name), "%s:%s", sys, ev);
	if (g->ndyn && bsearch(&key, g->dyn, g->ndyn, sizeof(*g->dyn), names_cmp))
		return 0;
	return names_add(&g->v, &g->n, &g->cap, name);
}

/* Every events/SYS/EVENT directory (fixtures have no available_events). */
static int list_dirs(const char *dir, struct tglob *g, const char *sys_pat,
		     const char *ev_pat)
{
	char path[512];
	DIR *d, *e;
	struct dirent *s, *v;
	int err = 0;

	snprintf(path, sizeof(path), "%s/events", dir);
	if (!(d = opendir(path)))
		return -errno;
	while (!err && (s = readdir(d))) {
		if (s->d_name[0] == '.' || fnmatch(sys_pat, s->d_name, 0))
			continue;
		snprintf(path, sizeof(path), "%s/events/%s", dir, s->d_name);
		if (!(e = opendir(path)))
			continue;	/* a file: enable, header_page ... */
		while (!err && (v = readdir(e)))
			if (v->d_name[0] != '.' && v->d_type == DT_DIR)
				err = consider(g, s->d_name, v->d_name, sys_pat, ev_pat);
		closedir(e);
	}
	closedir(d);
	return err;
}

int tracefs_glob(const char *dir, const char *sys_pat, const char *ev_pat,
		 int (*cb)(const char *sys, const char *event, void *arg), void *arg,
		 int *nmatch)
{
	struct tglob g = { 0 };
	char path[512], line[512];
	FILE *f;
	int err;

	*nmatch = 0;
	err = read_dynamic(dir, &g);
	snprintf(path, sizeof(path), "%s/available_events", dir);
	if (!err && (f = fopen(path, "re"))) {
		while (!err && fgets(line, sizeof(line), f)) {
			char *c = strchr(line, ':');

			line[strcspn(line, "\n")] = '\0';
			if (!c)
				continue;
			*c = '\0';
			err = consider(&g, line, c + 1, sys_pat, ev_pat);
		}
		fclose(f);
	} else if (!err) {
		err = list_dirs(dir, &g, sys_pat, ev_pat);
	}
	if (g.n)	/* qsort(NULL, 0, ...) is undefined */
		qsort(g.v, g.n, sizeof(*g.v), names_cmp);
	*nmatch = (int)g.n;
	if (!err && g.n > TRACEFS_GLOB_MAX)
		err = -E2BIG;
	for (size_t i = 0; !err && cb && i < g.n; i++) {
		char *c = strchr(g.v[i], ':');

		*c = '\0';
		err = cb(g.v[i], c + 1, arg);
	}
	names_free(g.v, g.n);
	names_free(g.dyn, g.ndyn);
	return err ? err : (int)*nmatch;
}
