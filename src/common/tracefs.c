// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
