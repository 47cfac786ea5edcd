// SPDX-License-Identifier: MIT
/*
 * fay probes [PATTERN]: list probe points, one per line, spelled the way
 * a query names them: syscall:NAME, tracepoint:SYS:EVENT,
 * kernel.function:NAME, function:PATH:SYMBOL, usdt:PATH:PROVIDER:NAME.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/kbtf.h"
#include "cli/cmds.h"
#include "common/log.h"
#include "probe/elfsym.h"
#include "probe/probe.h"

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    fay probes - list probe points: syscalls, tracepoints, kernel functions,\n"
"    functions and USDT probes of a binary or library\n"
"\n"
"SYNOPSIS\n"
"    fay probes [-c] [PATTERN]\n"
"    fay probes [-c] BINARY:PATTERN\n"
"\n"
"DESCRIPTION\n"
"    Prints one probe point per line, in the form a query uses:\n"
"        syscall:read                     from s in syscall(\"read\")\n"
"        tracepoint:sched:sched_switch    tracepoint(\"sched:sched_switch\")\n"
"        kernel.function:vfs_read         kernel.function(\"vfs_read\")\n"
"        function:/lib/x86_64-linux-gnu/libc.so.6:read   function(\"libc:read\")\n"
"        usdt:/usr/bin/prog:provider:name usdt(\"/usr/bin/prog:provider:name\")\n"
"\n"
"    PATTERN is a shell glob (*, ?, [...]) matched against the name (read,\n"
"    sched:sched_switch, vfs_read) or the whole line.  Without a PATTERN\n"
"    everything on the kernel side is listed (tens of thousands of lines).\n"
"    A PATTERN may start with a kind to list only that kind:\n"
"    syscall:, tracepoint:, kernel.function:, function: or usdt:.\n"
"\n"
"    BINARY:PATTERN lists the function symbols (.symtab and .dynsym) and the\n"
"    USDT probes (.note.stapsdt) of a binary or library.  BINARY is a path\n"
"    (anything with a '/') or a library name such as libc or libssl.so.3,\n"
"    found the way the dynamic loader would (/etc/ld.so.cache, then the\n"
"    standard library directories).  Write function:NAME:PATTERN to look a\n"
"    program up in $PATH.\n"
"\n"
"    Syscalls and tracepoints come from tracefs (mounted at\n"
"    /sys/kernel/tracing when absent, which needs root); kernel functions\n"
"    from the kernel's BTF (/sys/kernel/btf/vmlinux).\n"
"\n"
"OPTIONS\n"
"    -c, --count    print only the number of matching probe points\n"
"    -h, --help     this manual\n"
"\n"
"EXAMPLES\n"
"    fay probes 'sys_*read*'            nothing: syscalls are named read, pread64\n"
"    fay probes 'syscall:*read*'        read, readv, pread64, process_vm_readv ...\n"
"    fay probes 'sched:*'               the scheduler's tracepoints\n"
"    fay probes 'kernel.function:vfs_*' VFS entry points\n"
"    fay probes 'libc:pthread_mutex_*'  libc's mutex functions\n"
"    fay probes '/usr/bin/python3:*'    functions and USDT probes of python\n"
"\n"
"EXIT STATUS\n"
"    0 when something matched, 1 when nothing did or a source could not\n"
"    be read, 2 on a usage error.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_LOG_LEVEL   error, warn, info or debug (default info).\n"
"\n"
"FILES\n"
"    /sys/kernel/tracing/available_events, /sys/kernel/tracing/events/,\n"
"    /sys/kernel/btf/vmlinux, /etc/ld.so.cache.\n");
}

enum { K_SYSCALL = 1, K_TRACEPOINT = 2, K_KFUNC = 4, K_FUNCTION = 8, K_USDT = 16 };

struct lister {
	const char *glob;	/* on the name */
	int kinds;
	bool count_only;
	unsigned long n;
	char **lines;		/* for sort + uniq of binary symbols */
	size_t nlines, cap;
};

/* Match the name or the whole "kind:name" line. */
static void emit(struct lister *l, const char *kind, const char *name)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s:%s", kind, name);
	if (!glob_match(l->glob, name) && !glob_match(l->glob, line))
		return;
	l->n++;
	if (!l->count_only)
		printf("%s\n", line);
}

static int list_syscalls(struct lister *l, const char *tdir)
{
	char path[512];
	struct dirent **ents;
	int n;

	snprintf(path, sizeof(path), "%s/events/syscalls", tdir);
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0) {
		pr_warn("cannot list syscalls in %s: %s", path, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		if (!strncmp(ents[i]->d_name, "sys_enter_", 10))
			emit(l, "syscall", ents[i]->d_name + 10);
		free(ents[i]);
	}
	free(ents);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_line(struct lister *l, const char *s)
{
	if (l->nlines == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		char **n = realloc(l->lines, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		l->lines = n;
		l->cap = cap;
	}
	l->lines[l->nlines] = strdup(s);
	if (!l->lines[l->nlines])
		return -ENOMEM;
	l->nlines++;
	return 0;
}

static int list_tracepoints(struct lister *l, const char *tdir)
{
	char path[512], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/available_events", tdir);
	f = fopen(path, "re");
	if (!f) {
		pr_warn("cannot read %s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (*line && add_line(l, line)) {
			fclose(f);
			return -ENOMEM;
		}
	}
	fclose(f);
	qsort(l->lines, l->nlines, sizeof(*l->lines), cmp_str);
	for (size_t i = 0; i < l->nlines; i++) {
		emit(l, "tracepoint", l->lines[i]);
		free(l->lines[i]);
	}
	l->nlines = 0;
	return 0;
}

static int add_kfunc(const char *name, int nargs, void *ctx)
{
	(void)nargs;
	return add_line(ctx, name) ? -ENOMEM : 0;
}

static int list_kfuncs(struct lister *l)
{
	struct kbtf *btf = kbtf_open();
	int err;

	if (!btf) {
		err = -errno;
		pr_warn("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): %s",
			strerror(-err));
		return err;
	}
	err = kbtf_each_func(btf, add_kfunc, l);
	kbtf_free(btf);
	if (err)
		return err;
	qsort(l->lines, l->nlines, sizeof(*l->lines), cmp_str);
	for (size_t i = 0; i < l->nlines; i++) {
		if (!i || strcmp(l->lines[i], l->lines[i - 1]))
			emit(l, "kernel.function", l->lines[i]);
	}
	for (size_t i = 0; i < l->nlines; i++)
		free(l->lines[i]);
	l->nlines = 0;
	return 0;
}

struct binctx {
	struct lister *l;
	const char *path;
	int err;
};

static int func_cb(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct binctx *b = arg;
	char s[1024];

	snprintf(s, sizeof(s), "%.*s", (int)strcspn(name, "@"), name);
	if (add_line(b->l, s)) {
		b->err = -ENOMEM;
		return 1;
	}
	return 0;
}

static int usdt_cb(const struct usdt_site *site, void *arg)
{
	struct binctx *b = arg;
	char s[256];

	snprintf(s, sizeof(s), "%s:%s", site->provider, site->name);
	if (add_line(b->l, s)) {
		b->err = -ENOMEM;
		return 1;
	}
	return 0;
}

/* Functions and USDT probes of bin, the glob applied to the symbol name. */
static int list_binary(struct lister *l, const char *bin)
{
	char path[4096], what[4200];
	struct binctx b = { .l = l, .path = path };
	int err = elf_resolve_path(bin, path, sizeof(path));

	if (err) {
		pr_err("cannot find \"%s\": not a file, a library known to the "
		       "dynamic loader, nor a program in $PATH", bin);
		return err;
	}
	for (int pass = 0; pass < 2; pass++) {
		int kind = pass ? K_USDT : K_FUNCTION;

		if (!(l->kinds & kind))
			continue;
		err = pass ? elf_foreach_usdt(path, usdt_cb, &b) :
			     elf_foreach_func(path, func_cb, &b);
		if (err < 0 || b.err) {
			pr_err("cannot read symbols of %s: %s", path,
			       err == -ENOEXEC ? "not an ELF file" :
			       strerror(-(b.err ? b.err : err)));
			return err < 0 ? err : b.err;
		}
		qsort(l->lines, l->nlines, sizeof(*l->lines), cmp_str);
		for (size_t i = 0; i < l->nlines; i++) {
			if (i && !strcmp(l->lines[i], l->lines[i - 1]))
				continue;
			if (!glob_match(l->glob, l->lines[i]))
				continue;
			snprintf(what, sizeof(what), "%s:%s", path, l->lines[i]);
			l->n++;
			if (!l->count_only)
				printf("%s:%s\n", pass ? "usdt" : "function", what);
		}
		for (size_t i = 0; i < l->nlines; i++)
			free(l->lines[i]);
		l->nlines = 0;
	}
	return 0;
}

static const struct { const char *name; int kind; } kind_names[] = {
	{ "syscall", K_SYSCALL }, { "tracepoint", K_TRACEPOINT },
	{ "kernel.function", K_KFUNC }, { "function", K_FUNCTION },
	{ "usdt", K_USDT },
};

int cmd_probes(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct lister l = { .kinds = K_SYSCALL | K_TRACEPOINT | K_KFUNC };
	char *pat = NULL, *bin = NULL;
	int c, failed = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ch", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			l.count_only = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "usage: fay probes [-c] [PATTERN] (see fay probes --help)\n");
			return 2;
		}
	}
	if (argc - optind > 1) {
		fprintf(stderr, "error: fay probes takes one PATTERN, got %d "
			"(quote globs: 'sched:*')\n", argc - optind);
		return 2;
	}
	if (optind < argc)
		pat = strdup(argv[optind]);
	if (pat) {
		char *rest = pat, *colon;

		for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
			size_t n = strlen(kind_names[i].name);

			if (!strncmp(pat, kind_names[i].name, n) && pat[n] == ':') {
				l.kinds = kind_names[i].kind;
				rest = pat + n + 1;
				break;
			}
		}
		colon = strrchr(rest, ':');
		if (l.kinds & (K_FUNCTION | K_USDT)) {
			if (!colon) {
				fprintf(stderr, "error: %s: expected BINARY:PATTERN\n", pat);
				free(pat);
				return 2;
			}
		}
		/* BINARY:PATTERN: a path, or a library name. */
		if (colon && ((l.kinds & (K_FUNCTION | K_USDT)) ||
			      (colon > rest && (memchr(rest, '/', colon - rest) ||
					       !strncmp(rest, "lib", 3))))) {
			*colon = '\0';
			bin = rest;
			l.glob = colon + 1;
			if (!(l.kinds & (K_FUNCTION | K_USDT)))
				l.kinds = K_FUNCTION | K_USDT;
			if (l.kinds == K_USDT) {
				/* usdt:BIN:PROVIDER:NAME globs keep their colon */
				char *c2 = strrchr(bin, ':');

				if (c2 && !strchr(c2, '/')) {
					*colon = ':';
					*c2 = '\0';
					l.glob = c2 + 1;
				}
			}
		} else {
			l.glob = rest;
		}
	}
	if (bin) {
		failed = list_binary(&l, bin) != 0;
	} else {
		const char *tdir = NULL;

		if (l.kinds & (K_SYSCALL | K_TRACEPOINT)) {
			tdir = tracefs_dir();
			if (!tdir) {
				pr_warn("tracefs is not mounted and cannot be mounted "
					"(%s): syscalls and tracepoints are not listed "
					"(run as root)", strerror(errno));
				failed = 1;
			}
		}
		if (tdir && (l.kinds & K_SYSCALL) && list_syscalls(&l, tdir))
			failed = 1;
		if (tdir && (l.kinds & K_TRACEPOINT) && list_tracepoints(&l, tdir))
			failed = 1;
		if ((l.kinds & K_KFUNC) && list_kfuncs(&l))
			failed = 1;
	}
	if (l.count_only)
		printf("%lu\n", l.n);
	free(l.lines);
	free(pat);
	return failed || !l.n ? 1 : 0;
}
