// SPDX-License-Identifier: MIT
/*
 * Maps and programs in the kernel, through libbpf's thin syscall wrappers
 * (bpf_map_create, bpf_prog_load: LIBBPF_0.6.0, fine with Debian's 1.1).
 * A failed load is retried with a verifier log; the failing instruction
 * is the last one the verifier printed before its complaint, and the IR
 * knows which source position that instruction came from.
 */
#include <ctype.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/insn.h"
#include "bpf/ir.h"
#include "bpf/load.h"
#include "common/err.h"
#include "common/log.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

struct bmap {
	char name[16];
	enum bpf_map_type type;
	uint32_t key_size, value_size, max_entries;
	uint32_t flags;			/* map_flags, e.g. BPF_F_NO_PREALLOC */
	int fd;
};

struct bprog {
	int fd;
	uint32_t id;
	char *log;
};

/* Kernel object names: [A-Za-z0-9_.], at most 15 characters. */
static void kname(char *dst, const char *src)
{
	size_t i;

	for (i = 0; src && src[i] && i < 15; i++)
		dst[i] = isalnum((unsigned char)src[i]) || src[i] == '.' ?
			 src[i] : '_';
	dst[i] = '\0';
}

/* ---- privileges ------------------------------------------------------------- */

bool bpf_have_privileges(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	uint64_t eff;

	if (geteuid() == 0)
		return true;
	if (syscall(SYS_capget, &hdr, data))
		return false;
	eff = data[0].effective | (uint64_t)data[1].effective << 32;
	if (eff & (1ull << CAP_SYS_ADMIN))
		return true;
	return (eff & (1ull << CAP_BPF)) && (eff & (1ull << CAP_PERFMON));
}

int bpf_perf_link(int prog_fd, int perf_fd, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_link_create_opts, o, .perf_event.bpf_cookie = cookie);
	int fd = bpf_link_create(prog_fd, perf_fd, BPF_PERF_EVENT, &o);

	return fd < 0 ? -errno : fd;
}

int bpf_kprobe_multi_link(int prog_fd, const char *const *syms, size_t n, bool ret)
{
	__u64 *cookies = calloc(n ? n : 1, sizeof(*cookies));
	int fd;

	if (!cookies)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cookies[i] = i;
	LIBBPF_OPTS(bpf_link_create_opts, o,
		    .kprobe_multi.flags = ret ? BPF_F_KPROBE_MULTI_RETURN : 0,
		    .kprobe_multi.cnt = (__u32)n,
		    .kprobe_multi.syms = (const char **)syms,
		    .kprobe_multi.cookies = cookies);
	fd = bpf_link_create(prog_fd, 0, BPF_TRACE_KPROBE_MULTI, &o);
	if (fd < 0)
		fd = -errno;
	free(cookies);
	return fd;
}

/* BPF_LINK_CREATE's attribute for uprobe.multi (Linux 6.6), spelt out:
 * libbpf 1.1 and the 6.1 uapi headers Debian 12 builds with have neither
 * the attach type nor this member of union bpf_attr's link_create. */
struct umulti_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, umflags, pid;
	uint32_t pad[9];		/* zero: the kernel checks its tail */
};

int bpf_uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs,
			  const uint64_t *cookies, size_t n, pid_t pid, bool ret)
{
	struct umulti_attr a;
	long fd;

	if (!n || n > UINT32_MAX)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = BPF_TRACE_UPROBE_MULTI_NR;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = (uint32_t)n;
	a.umflags = ret ? 1u : 0u;	/* BPF_F_UPROBE_MULTI_RETURN */
	a.pid = pid > 0 ? (uint32_t)pid : 0;
	fd = syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}

int bpf_trivial_prog(enum bpf_prog_type type, enum bpf_attach_type expected,
		     uint32_t attach_btf_id)
{
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = expected,
		    .attach_btf_id = attach_btf_id);
	struct bpf_insn insns[] = { MOV64_IMM(BPF_REG_0, 0), EXIT_INSN() };
	int fd = bpf_prog_load(type, "fay_try", "GPL", insns, 2, &o);

	return fd < 0 ? -errno : fd;
}

int bpf_raw_tp_link(int prog_fd)
{
	int fd = bpf_raw_tracepoint_open(NULL, prog_fd);

	return fd < 0 ? -errno : fd;
}

bool bpf_have_ringbuf(void)
{
	return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
}

int bpf_have_task_regs(enum bpf_prog_type type)
{
	/* r0 = bpf_task_pt_regs(bpf_get_current_task_btf())->ip */
	struct bpf_insn insns[] = {
		CALL_HELPER(BPF_FUNC_get_current_task_btf),
		MOV64_REG(BPF_REG_1, BPF_REG_0),
		CALL_HELPER(BPF_FUNC_task_pt_regs),
		LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_0, 128),
		MOV64_IMM(BPF_REG_0, 0),
		EXIT_INSN(),
	};
	int fd = bpf_prog_load(type, "fay_try", "GPL", insns, 6, NULL);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

bool bpf_have_uprobe_multi(void)
{
	uint64_t off = 0, cookie = 0;
	int fd = bpf_trivial_prog(BPF_PROG_TYPE_KPROBE, BPF_TRACE_UPROBE_MULTI_NR, 0), link;

	if (fd < 0)
		return false;
	link = bpf_uprobe_multi_link(fd, "/", &off, &cookie, 1, 0, false);
	close(fd);
	if (link >= 0)
		close(link);
	return link == -EBADF;
}

const char *bpf_privilege_hint(void)
{
	if (bpf_have_privileges())
		return "the kernel refused the BPF operation (EPERM) although this "
		       "process has root/CAP_BPF+CAP_PERFMON (lockdown, LSM or "
		       "a disabled attach type)";
	return "loading BPF programs needs root, or CAP_BPF and CAP_PERFMON "
	       "(run fay with sudo, or setcap cap_bpf,cap_perfmon+ep on it)";
}

/* ---- maps --------------------------------------------------------------- */

struct bmap *bmap_new(const char *name, enum bpf_map_type type,
		      uint32_t key_size, uint32_t value_size,
		      uint32_t max_entries)
{
	struct bmap *m;

	switch (type) {
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_LRU_HASH:	/* uprobes' entry records (never full) */
		break;
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPF_MAP_TYPE_PERF_EVENT_ARRAY:	/* value: a perf event fd */
	case BPF_MAP_TYPE_STACK_TRACE:		/* key: the stack id (u32) */
		if (key_size != 4)
			return fay_err_ptr(-EINVAL);
		break;
	case BPF_MAP_TYPE_RINGBUF:
		/* No key nor value; max_entries is the size in bytes, a
		 * power of two and a multiple of the page size. */
		if (key_size || value_size || max_entries < 4096 ||
		    (max_entries & (max_entries - 1)))
			return fay_err_ptr(-EINVAL);
		key_size = value_size = 1;	/* pass the check below */
		break;
	default:
		return fay_err_ptr(-EINVAL);
	}
	if (!key_size || !value_size || !max_entries)
		return fay_err_ptr(-EINVAL);
	if (type == BPF_MAP_TYPE_RINGBUF)
		key_size = value_size = 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return fay_err_ptr(-ENOMEM);
	kname(m->name, name && *name ? name : "fay_map");
	m->type = type;
	m->key_size = key_size;
	m->value_size = value_size;
	m->max_entries = max_entries;
	m->fd = -1;
	return m;
}

void bmap_free(struct bmap *m)
{
	if (!m)
		return;
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

int bmap_create(struct bmap *m)
{
	int fd;
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = m->flags);

	if (m->fd >= 0)
		return 0;
	fd = bpf_map_create(m->type, m->name, m->key_size, m->value_size,
			    m->max_entries, &o);
	if (fd < 0)
		return -errno;
	m->fd = fd;
	return 0;
}

int bmap_set_flags(struct bmap *m, uint32_t flags)
{
	if (m->fd >= 0)
		return -EBUSY;
	m->flags = flags;
	return 0;
}

uint64_t bmap_mem_bytes(const struct bmap *m, int ncpus, bool *prealloc)
{
	uint64_t v = (m->value_size + 7u) & ~7u, k = (m->key_size + 7u) & ~7u;
	uint64_t copies = bmap_is_percpu(m) ? (uint64_t)(ncpus > 0 ? ncpus : 1) : 1;

	*prealloc = !(m->flags & BPF_F_NO_PREALLOC);
	switch (m->type) {
	case BPF_MAP_TYPE_RINGBUF:
		return m->max_entries;
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPF_MAP_TYPE_PERF_EVENT_ARRAY:
		*prealloc = true;
		return (uint64_t)m->max_entries * v * copies;
	default:
		return (uint64_t)m->max_entries * (64 + k + v * copies);
	}
}

const char *bmap_name(const struct bmap *m) { return m->name; }
int bmap_fd(const struct bmap *m) { return m->fd; }
enum bpf_map_type bmap_type(const struct bmap *m) { return m->type; }
uint32_t bmap_key_size(const struct bmap *m) { return m->key_size; }
uint32_t bmap_value_size(const struct bmap *m) { return m->value_size; }
uint32_t bmap_max_entries(const struct bmap *m) { return m->max_entries; }

bool bmap_is_percpu(const struct bmap *m)
{
	return m->type == BPF_MAP_TYPE_PERCPU_HASH ||
	       m->type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

int bpf_ncpus(void)
{
	return libbpf_num_possible_cpus();
}

size_t bmap_value_buf_size(const struct bmap *m)
{
	int n;

	if (!bmap_is_percpu(m))
		return m->value_size;
	n = bpf_ncpus();
	return (size_t)(n > 0 ? n : 1) * ((m->value_size + 7) & ~7u);
}

int bmap_lookup(const struct bmap *m, const void *key, void *value)
{
	if (m->fd < 0)
		return -EBADF;
	return bpf_map_lookup_elem(m->fd, key, value) ? -errno : 0;
}

int bmap_update(const struct bmap *m, const void *key, const void *value,
		uint64_t flags)
{
	if (m->fd < 0)
		return -EBADF;
	return bpf_map_update_elem(m->fd, key, value, flags) ? -errno : 0;
}

int bmap_delete(const struct bmap *m, const void *key)
{
	if (m->fd < 0)
		return -EBADF;
	return bpf_map_delete_elem(m->fd, key) ? -errno : 0;
}

int bmap_next_key(const struct bmap *m, const void *prev, void *next)
{
	return bmap_fd_next_key(m->fd, prev, next);
}

int bmap_fd_next_key(int fd, const void *prev, void *next)
{
	if (fd < 0)
		return -EBADF;
	return bpf_map_get_next_key(fd, prev, next) ? -errno : 0;
}

int bmap_sum_u64(const struct bmap *m, const void *key, unsigned int off,
		 uint64_t *sum)
{
	size_t sz = bmap_value_buf_size(m), stride = (m->value_size + 7) & ~7u;
	unsigned char *buf;
	int err;

	if (off + 8 > m->value_size)
		return -EINVAL;
	buf = calloc(1, sz);
	if (!buf)
		return -ENOMEM;
	err = bmap_lookup(m, key, buf);
	*sum = 0;
	if (!err) {
		size_t n = bmap_is_percpu(m) ? sz / stride : 1;

		for (size_t c = 0; c < n; c++) {
			uint64_t v;

			memcpy(&v, buf + c * stride + off, sizeof(v));
			*sum += v;
		}
	}
	free(buf);
	return err;
}

/* ---- programs ------------------------------------------------------------ */

void bprog_diag_clear(struct bprog_diag *d)
{
	if (!d)
		return;
	free(d->log);
	memset(d, 0, sizeof(*d));
	d->insn = d->ir_insn = -1;
}

static int create_map(struct bmap *m, void *arg)
{
	int err = bmap_create(m);

	if (err)
		*(struct bmap **)arg = m;
	return err;
}

/*
 * The verifier prints each instruction it checks as "N: (op) ..." and
 * its complaint after the last one.  Returns the failing instruction (or
 * -1) and copies the complaint into msg.
 */
static int parse_verifier_log(const char *log, char *msg, size_t len)
{
	const char *p = log, *last = NULL;
	int insn = -1;

	msg[0] = '\0';
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		int n, pos = 0;

		if (sscanf(p, "%d: (%*x)%n", &n, &pos) == 1 && pos > 0) {
			insn = n;
			last = eol;
		}
		p = eol ? eol + 1 : NULL;
	}
	/* The first line after the last instruction that is not state. */
	for (p = last ? last + 1 : log; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t l = eol ? (size_t)(eol - p) : strlen(p);

		if (l && !isdigit((unsigned char)*p) && strncmp(p, "processed ", 10) &&
		    strncmp(p, "verification time", 17) && *p != ';') {
			snprintf(msg, len, "%.*s", (int)l, p);
			break;
		}
		p = eol ? eol + 1 : NULL;
	}
	return insn;
}

static void diag_set(struct bprog_diag *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void diag_set(struct bprog_diag *d, int err, const char *fmt, ...)
{
	va_list ap;

	if (!d)
		return;
	d->err = err;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
}

/* Load with a log buffer, growing it while the kernel says ENOSPC.
 * Returns the fd or -errno; *logp gets the log (malloc'ed). */
static int load_logged(enum bpf_prog_type type, const char *name,
		       const struct bpf_insn *insns, size_t cnt,
		       struct bpf_prog_load_opts *o, char **logp)
{
	size_t size = 1 << 20;
	int fd;

	for (;;) {
		char *log = malloc(size);

		if (!log)
			return -ENOMEM;
		log[0] = '\0';
		o->log_buf = log;
		o->log_size = (uint32_t)size;
		o->log_level = 1;
		fd = bpf_prog_load(type, name, "GPL", insns, cnt, o);
		if (fd < 0)
			fd = -errno;
		if (fd == -ENOSPC && size < (64u << 20)) {
			free(log);
			size *= 4;
			continue;
		}
		*logp = log;
		o->log_buf = NULL;
		o->log_size = 0;
		o->log_level = 0;
		return fd;
	}
}

struct bprog *bprog_load(struct ir *ir, const struct bprog_opts *opts,
			 struct bprog_diag *diag)
{
	LIBBPF_OPTS(bpf_prog_load_opts, o);
	struct bpf_prog_info info = { 0 };
	uint32_t info_len = sizeof(info);
	struct bmap *bad = NULL;
	const struct bpf_insn *insns;
	struct bprog *p = NULL;
	char name[16], *log = NULL;
	size_t cnt;
	int fd, err;

	if (diag) {
		memset(diag, 0, sizeof(*diag));
		diag->insn = diag->ir_insn = -1;
	}
	if (!opts || opts->sz < offsetof(struct bprog_opts, keep_log)) {
		diag_set(diag, -EINVAL, "bprog_load: no or short options");
		return fay_err_ptr(-EINVAL);
	}
	err = ir_lower(ir);
	if (err) {
		diag_set(diag, err, "cannot lower program %s: %s", ir_name(ir),
			 ir_strerror(ir));
		return fay_err_ptr(err);
	}
	err = ir_foreach_map(ir, create_map, &bad);
	if (err) {
		diag_set(diag, err, "cannot create map %s: %s", bmap_name(bad),
			 err == -EPERM ? bpf_privilege_hint() : errstr(err));
		return fay_err_ptr(err);
	}
	err = ir_fixup_maps(ir);
	if (err) {
		diag_set(diag, err, "internal: a map of %s has no fd", ir_name(ir));
		return fay_err_ptr(err);
	}
	insns = ir_insns(ir, &cnt);
	kname(name, ir_name(ir));
	o.expected_attach_type = opts->attach_type;
	o.attach_btf_id = opts->attach_btf_id;

	if (opts->sz > offsetof(struct bprog_opts, keep_log) && opts->keep_log) {
		fd = load_logged(opts->type, name, insns, cnt, &o, &log);
	} else {
		fd = bpf_prog_load(opts->type, name, "GPL", insns, cnt, &o);
		if (fd < 0)
			fd = -errno;
		if (fd < 0 && fd != -EPERM && fd != -ENOMEM)
			fd = load_logged(opts->type, name, insns, cnt, &o, &log);
	}
	if (fd < 0) {
		err = fd;
		if (err == -EPERM) {
			diag_set(diag, err, "cannot load %s: %s", ir_name(ir),
				 bpf_privilege_hint());
		} else if (log && *log) {
			char why[256];
			int insn = parse_verifier_log(log, why, sizeof(why));
			uint32_t line = 0, col = 0;
			int iri = insn >= 0 ? ir_insn_origin(ir, insn, &line, &col) : -1;

			if (diag) {
				diag->insn = insn;
				diag->ir_insn = iri;
				diag->line = line;
				diag->col = col;
			}
			if (line || col)
				diag_set(diag, err, "%u:%u: the BPF verifier rejected "
					 "the program: %s (insn %d)", line, col,
					 why[0] ? why : errstr(err), insn);
			else
				diag_set(diag, err, "the BPF verifier rejected %s: %s "
					 "(insn %d, IR %d)", ir_name(ir),
					 why[0] ? why : errstr(err), insn, iri);
		} else {
			diag_set(diag, err, "cannot load %s: %s", ir_name(ir),
				 errstr(err));
		}
		if (diag)
			diag->log = log;
		else
			free(log);
		return fay_err_ptr(err);
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		close(fd);
		free(log);
		diag_set(diag, -ENOMEM, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	p->fd = fd;
	p->log = log;
	if (!bpf_obj_get_info_by_fd(fd, &info, &info_len))
		p->id = info.id;
	return p;
}

void bprog_free(struct bprog *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	free(p->log);
	free(p);
}

int bprog_fd(const struct bprog *p) { return p->fd; }
uint32_t bprog_id(const struct bprog *p) { return p->id; }
const char *bprog_log(const struct bprog *p) { return p->log; }

int bprog_test_run(const struct bprog *p, void *data, uint32_t size,
		   uint32_t *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = data, .data_size_in = size,
		    .repeat = 1);

	if (bpf_prog_test_run_opts(p->fd, &o))
		return -errno;
	if (retval)
		*retval = o.retval;
	return 0;
}
