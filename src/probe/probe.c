// SPDX-License-Identifier: MIT
/*
 * Probe dispatch (provider vtables), perf-event attachment shared by the
 * tracepoint, uprobe, kprobe and profile providers, and tracefs.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/tracefs.h"
#include "probe/demangle.h"
#include "probe/provider.h"

#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

int probe_fail(struct probe *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return err;
}

int probe_keep_fd(struct probe *p, int fd)
{
	int *n = realloc(p->fds, (p->nfds + 1) * sizeof(*n));

	if (!n) {
		close(fd);
		return -ENOMEM;
	}
	p->fds = n;
	p->fds[p->nfds++] = fd;
	return 0;
}

static const struct provider *provider_of(enum probe_kind k)
{
	switch (k) {
	case PROBE_TRACEPOINT:
	case PROBE_SYSCALL:
	case PROBE_SYSCALL_EXIT:
		return &provider_tracepoint;
	case PROBE_KFUNC:
	case PROBE_KFUNC_EXIT:
		return &provider_kfunc;
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
		return &provider_uprobe;
	case PROBE_USDT:
		return &provider_usdt;
	case PROBE_PROFILE:
		return &provider_profile;
	}
	return NULL;
}

struct probe *probe_new(enum probe_kind kind, const char *spec,
			const struct probe_opts *opts, char *err, size_t errlen)
{
	const struct provider *prov = provider_of(kind);
	struct probe *p;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!prov || !spec) {
		if (err)
			snprintf(err, errlen, "unknown probe kind %d", kind);
		return fay_err_ptr(-EINVAL);
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->spec = strdup(spec))) {
		free(p);
		if (err)
			snprintf(err, errlen, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	p->prov = prov;
	p->kind = kind;
	p->nargs = -1;
	p->mech = prov->name;
	if (opts)
		memcpy(&p->opts, opts, opts->sz < sizeof(p->opts) ? opts->sz :
		       sizeof(p->opts));
	p->opts.sz = sizeof(p->opts);
	rc = prov->resolve(p);
	if (rc) {
		if (err)
			snprintf(err, errlen, "%s", p->err[0] ? p->err : errstr(rc));
		probe_free(p);
		return fay_err_ptr(rc);
	}
	return p;
}

void probe_detach(struct probe *p)
{
	for (size_t i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	free(p->fds);
	p->fds = NULL;
	p->nfds = 0;
}

void probe_free(struct probe *p)
{
	if (!p)
		return;
	probe_detach(p);
	if (p->prov->release)
		p->prov->release(p);
	free(p->fields);
	for (size_t i = 0; i < p->nmore; i++)
		free(p->more[i].path);
	free(p->more);
	free(p->kids);
	for (size_t i = 0; i < p->nsites; i++)
		free(p->sites[i]);
	free(p->sites);
	free(p->spec);
	free(p);
}

enum probe_kind probe_kind(const struct probe *p) { return p->kind; }
const char *probe_describe(const struct probe *p) { return p->desc; }
const char *probe_mechanism(const struct probe *p) { return p->mech; }
const char *probe_strerror(const struct probe *p) { return p->err; }
int probe_nargs(const struct probe *p) { return p->nargs; }
bool probe_attached(const struct probe *p) { return p->nfds > 0; }

size_t probe_nsites(const struct probe *p)
{
	return p->nsites;
}

const char *probe_site_name(const struct probe *p, size_t i)
{
	return i < p->nsites ? p->sites[i] : NULL;
}

int probe_uprobe_site(const struct probe *p, const char **path, uint64_t *offset,
		      const char **sym)
{
	const char *c = sym_spec_colon(p->spec);

	if ((p->kind != PROBE_UPROBE && p->kind != PROBE_URETPROBE) || !c ||
	    probe_nsites(p))
		return -EINVAL;
	*path = p->path;
	*offset = p->offset;
	*sym = c + 1;
	return 0;
}

const char *probe_binary(const struct probe *p)
{
	if (p->kind != PROBE_UPROBE && p->kind != PROBE_URETPROBE && p->kind != PROBE_USDT)
		return NULL;
	return p->path[0] ? p->path : NULL;
}

void probe_prog_opts(const struct probe *p, struct bprog_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sz = sizeof(*o);
	o->type = p->prog_type;
	o->attach_type = p->attach_type;
	o->attach_btf_id = p->attach_btf_id;
}

const struct probe_field *probe_fields(const struct probe *p, size_t *n)
{
	*n = p->nfields;
	return p->fields;
}

int probe_emit_arg(struct probe *p, struct ir *ir, ir_reg dst, int n)
{
	if (!p->prov->emit_arg)
		return probe_fail(p, -EOPNOTSUPP, "%s has no arguments", p->desc);
	if (n < 0 || (p->nargs >= 0 && n >= p->nargs))
		return probe_fail(p, -ENOENT, "arg(%d): %s has %d argument%s", n,
				  p->desc, p->nargs, p->nargs == 1 ? "" : "s");
	return p->prov->emit_arg(p, ir, dst, n);
}

int probe_emit_ret(struct probe *p, struct ir *ir, ir_reg dst)
{
	if (!p->prov->emit_ret)
		return probe_fail(p, -EOPNOTSUPP, "%s has no return value", p->desc);
	return p->prov->emit_ret(p, ir, dst);
}

int probe_emit_field(struct probe *p, struct ir *ir, ir_reg dst, const char *name)
{
	if (!p->prov->emit_field)
		return probe_fail(p, -EOPNOTSUPP, "%s has no fields", p->desc);
	return p->prov->emit_field(p, ir, dst, name);
}

int probe_emit_field_copy(struct probe *p, struct ir *ir, int off,
			  unsigned int size, const char *name)
{
	for (size_t i = 0; i < p->nfields; i++) {
		const struct probe_field *f = &p->fields[i];
		unsigned int done = 0;

		if (strcmp(f->name, name))
			continue;
		if (strstr(f->type, "__data_loc"))
			return probe_fail(p, -EOPNOTSUPP, "field %s of %s is "
					  "dynamic (__data_loc): not supported",
					  name, p->desc);
		/* Tracepoint context reads must be aligned to their size. */
		while (done < size && done < (unsigned int)f->size) {
			unsigned int left = size - done, o = f->offset + done, w = 1;
			ir_reg t = ir_vreg(ir);

			if (left > (unsigned int)f->size - done)
				left = f->size - done;
			if (left >= 8 && !(o & 7) && !((off + done) & 7))
				w = 8;
			else if (left >= 4 && !(o & 3) && !((off + done) & 3))
				w = 4;
			else if (left >= 2 && !(o & 1) && !((off + done) & 1))
				w = 2;
			ir_load(ir, t, IR_R(ir_ctx(ir)), (int)o, w, 0);
			ir_store(ir, IR_S(off), (int)done, w, IR_R(t));
			done += w;
		}
		if (done < size)
			ir_zero(ir, off + (int)done, size - done);
		return 0;
	}
	return probe_fail(p, -ENOENT, "%s has no field '%s'", p->desc, name);
}

int probe_attach(struct probe *p, int prog_fd)
{
	int err;

	if (p->nfds)
		return probe_fail(p, -EBUSY, "%s is already attached", p->desc);
	p->err[0] = '\0';
	p->prog_fd = prog_fd;
	err = p->prov->attach(p, prog_fd);
	if (err) {
		probe_detach(p);
		if (err == -EPERM && !p->err[0])
			probe_fail(p, err, "cannot attach %s: %s", p->desc,
				   bpf_privilege_hint());
		else if (err == -EACCES && !p->err[0] && geteuid())
			/* perf_event_open() of the uprobe PMU as non-root */
			probe_fail(p, err, "cannot attach %s: %s (not root: this kernel's perf_event_open() of uprobes and kprobes asks for CAP_SYS_ADMIN, beyond CAP_BPF and CAP_PERFMON)",
				   p->desc, errstr(err));
		else if (err == -E2BIG && !p->err[0])
			/* perf_event_attach_bpf_prog(): BPF_TRACE_MAX_PROGS */
			probe_fail(p, err, "cannot attach %s: the kernel takes at most 64 BPF programs on one tracepoint or probe, and other programs (other fay queries or agents, bpftrace, perf) hold them",
				   p->desc);
		else if (!p->err[0])
			probe_fail(p, err, "cannot attach %s: %s", p->desc,
				   errstr(err));
	}
	return err;
}

void emit_pt_regs(struct ir *ir, ir_reg dst, int off)
{
	ir_load(ir, dst, IR_R(ir_ctx(ir)), off, 8, 0);
}

/* ---- perf events ------------------------------------------------------------ */

int perf_attach_bpf(struct perf_event_attr *attr, pid_t pid, int cpu, int prog_fd)
{
	int fd;

	attr->size = sizeof(*attr);
	fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd) ||
	    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int perf_attach_bpf_cookie(struct probe *p, struct perf_event_attr *attr, pid_t pid,
			   int cpu, int prog_fd, uint64_t cookie)
{
	int fd, link, err;

	attr->size = sizeof(*attr);
	fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = probe_keep_fd(p, fd);
	if (err)
		return err;
	link = bpf_perf_link(prog_fd, fd, cookie);
	if (link < 0)
		return link;
	return probe_keep_fd(p, link);
}

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int perf_pmu_type(const char *name)
{
	char path[256], buf[32];
	int err;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", name);
	err = read_small(path, buf, sizeof(buf));
	return err ? err : atoi(buf);
}

int perf_pmu_bit(const char *pmu, const char *field)
{
	char path[256], buf[64];
	int err, bit;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/format/%s",
		 pmu, field);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	if (sscanf(buf, "config:%d", &bit) != 1)
		return -EINVAL;
	return bit;
}

/* ---- tracefs ---------------------------------------------------------------- */

const char *tracefs_dir(void)
{
	return tracefs_find();
}

/* A format line into f; 0, or -EINVAL when it is not a field line. */
static int parse_field(char *line, struct probe_field *f)
{
	struct tracefs_field tf;

	if (tracefs_parse_field(line, &tf) != 1)
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", tf.name);
	snprintf(f->type, sizeof(f->type), "%s", tf.ctype);
	f->offset = tf.offset;
	f->size = tf.size;
	f->is_signed = tf.is_signed;
	f->is_array = tf.is_array || tf.is_string || tf.data_loc;
	return 0;
}

int tracefs_format(const char *sys, const char *event, struct probe_field **fields,
		   size_t *nfields, int *id)
{
	const char *dir = tracefs_dir();
	char path[512], line[1024];
	struct probe_field *fs = NULL;
	size_t n = 0;
	FILE *f;

	*fields = NULL;
	*nfields = 0;
	if (!dir)
		return -errno;
	if (strchr(sys, '/') || strchr(event, '/') || !*sys || !*event)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/events/%s/%s/format", dir, sys, event);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*id = -1;
	while (fgets(line, sizeof(line), f)) {
		struct probe_field fl, *nf;

		if (sscanf(line, "ID: %d", id) == 1)
			continue;
		if (parse_field(line, &fl) || !strncmp(fl.name, "common_", 7))
			continue;
		nf = realloc(fs, (n + 1) * sizeof(*fs));
		if (!nf) {
			free(fs);
			fclose(f);
			return -ENOMEM;
		}
		fs = nf;
		fs[n++] = fl;
	}
	fclose(f);
	if (*id < 0) {
		free(fs);
		return -EINVAL;
	}
	*fields = fs;
	*nfields = n;
	return 0;
}
