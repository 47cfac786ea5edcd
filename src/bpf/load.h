/* SPDX-License-Identifier: MIT */
/*
 * Maps and programs in the kernel.  A struct bmap describes a map and
 * creates it on demand (bpf_map_create); bprog_load() creates the maps a
 * lowered IR references, loads the program with a verifier log and, when
 * the verifier says no, maps the failing instruction back to the IR
 * instruction and its source position.
 */
#ifndef FAY_BPF_LOAD_H
#define FAY_BPF_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/bpf.h>

struct ir;
struct bmap;
struct bprog;

/* A map: HASH, PERCPU_HASH, LRU_HASH, ARRAY or PERCPU_ARRAY with a bound on entries;
 * also PERF_EVENT_ARRAY (key and value 4 bytes, one entry per CPU) and
 * RINGBUF (key and value 0, max_entries the size in bytes: a power of two
 * and a multiple of the page size), which a brbuf (rbuf.h) reads.
 * Nothing is created in the kernel until bmap_create() (or bprog_load() of
 * a program using it).  Returns NULL and sets errno (EINVAL for another
 * type, zero sizes or max_entries, ENOMEM).  Free with bmap_free(). */
struct bmap *bmap_new(const char *name, enum bpf_map_type type,
		      uint32_t key_size, uint32_t value_size,
		      uint32_t max_entries);
/* Closes the map's fd (the kernel frees it with its last user). */
void bmap_free(struct bmap *m);
/* map_flags for the creation (BPF_F_NO_PREALLOC ...): before
 * bmap_create().  0 or -EBUSY. */
int bmap_set_flags(struct bmap *m, uint32_t flags);
/* Create in the kernel if not yet done.  0 or -errno (-EPERM: see
 * bpf_privilege_hint()). */
int bmap_create(struct bmap *m);

const char *bmap_name(const struct bmap *m);
int bmap_fd(const struct bmap *m);	/* -1 before bmap_create() */
enum bpf_map_type bmap_type(const struct bmap *m);
uint32_t bmap_key_size(const struct bmap *m);
uint32_t bmap_value_size(const struct bmap *m);
uint32_t bmap_max_entries(const struct bmap *m);
bool bmap_is_percpu(const struct bmap *m);
/*
 * Kernel memory the map takes at creation (arrays, rings, preallocated
 * hashes: everything) or at most once every key is in (a hash created with
 * BPF_F_NO_PREALLOC takes nothing until keys come), with ncpus copies of a
 * per-CPU value, each entry's bookkeeping counted as 64 bytes.  An
 * estimate for limits and reports, within a few percent of the kernel's.
 */
uint64_t bmap_mem_bytes(const struct bmap *m, int ncpus, bool *prealloc);

/* Number of possible CPUs: the number of values a per-CPU lookup returns. */
int bpf_ncpus(void);

/* Size of the buffer bmap_lookup() needs for one value: value_size, or
 * ncpus * round_up(value_size, 8) for a per-CPU map. */
size_t bmap_value_buf_size(const struct bmap *m);
/* Copy map[key] into value (bmap_value_buf_size() bytes).  0, -ENOENT. */
int bmap_lookup(const struct bmap *m, const void *key, void *value);
int bmap_update(const struct bmap *m, const void *key, const void *value,
		uint64_t flags);
int bmap_delete(const struct bmap *m, const void *key);
/* Walk keys: prev NULL gives the first.  0, -ENOENT at the end. */
int bmap_next_key(const struct bmap *m, const void *prev, void *next);
/* bmap_next_key() by the map's fd alone (a child process that moved its
 * descriptors): one system call, no lock nor allocation. */
int bmap_fd_next_key(int fd, const void *prev, void *next);
/* Sum of the u64 at byte off of map[key] over all CPUs (a plain read for
 * a map that is not per-CPU).  0 or -errno. */
int bmap_sum_u64(const struct bmap *m, const void *key, unsigned int off,
		 uint64_t *sum);

/* How to load a program. */
struct bprog_opts {
	size_t sz;			/* sizeof(struct bprog_opts) */
	enum bpf_prog_type type;
	enum bpf_attach_type attach_type;	/* expected_attach_type */
	uint32_t attach_btf_id;		/* fentry/fexit: vmlinux BTF id */
	bool keep_log;			/* keep the verifier log on success too */
};
#define bprog_opts__last_field keep_log

/* Why a load failed.  msg is short ("3:7: verifier: R0 invalid mem access
 * 'map_value_or_null' (insn 5)"); log is the verifier's full text or NULL
 * (malloc'ed: bprog_diag_clear()). */
struct bprog_diag {
	int err;			/* -errno */
	int insn;			/* failing BPF instruction, or -1 */
	int ir_insn;			/* its IR instruction, or -1 */
	uint32_t line, col;		/* its source position, 0:0 if none */
	char msg[512];
	char *log;
};
void bprog_diag_clear(struct bprog_diag *d);

/* Lower ir (if not done yet), create its maps, load it.  Returns NULL and
 * sets errno on failure; diag (may be NULL) says why.  The ir must outlive
 * nothing: the bprog keeps no reference to it.  Free with bprog_free(). */
struct bprog *bprog_load(struct ir *ir, const struct bprog_opts *opts,
			 struct bprog_diag *diag);
/* Closes the program fd; the kernel frees the program with its last
 * attachment. */
void bprog_free(struct bprog *p);
int bprog_fd(const struct bprog *p);
/* The kernel's program id (for bpftool prog show id N), 0 if unknown. */
uint32_t bprog_id(const struct bprog *p);
/* The verifier log kept with keep_log, or NULL. */
const char *bprog_log(const struct bprog *p);

/* Run the program once on data (BPF_PROG_TEST_RUN; socket filter and XDP
 * programs); *retval gets r0.  0 or -errno. */
int bprog_test_run(const struct bprog *p, void *data, uint32_t size,
		   uint32_t *retval);

/* Does this process hold what loading needs (root, or CAP_BPF and
 * CAP_PERFMON)?  */
bool bpf_have_privileges(void);
/* Attach program prog_fd to the perf event perf_fd through a BPF link
 * carrying cookie (bpf_get_attach_cookie() in the program; Linux 5.15).
 * Returns the link's fd (closing it detaches) or -errno. */
int bpf_perf_link(int prog_fd, int perf_fd, uint64_t cookie);
/* Attach the kprobe program prog_fd (loaded with expected attach type
 * BPF_TRACE_KPROBE_MULTI) to the n kernel functions syms[] in one
 * kprobe.multi link (Linux 5.18), function i's hits carrying i as the
 * cookie; ret: on their returns instead.  Returns the link's fd or
 * -errno (ESRCH: a name the kernel cannot resolve; EOPNOTSUPP: no
 * CONFIG_FPROBE). */
int bpf_kprobe_multi_link(int prog_fd, const char *const *syms, size_t n, bool ret);
/* The attach type of uprobe.multi programs (BPF_TRACE_UPROBE_MULTI,
 * Linux 6.6), which the uapi headers fay builds with may lack. */
#define BPF_TRACE_UPROBE_MULTI_NR ((enum bpf_attach_type)48)
/* Attach the kprobe program prog_fd (loaded with expected attach type
 * BPF_TRACE_UPROBE_MULTI_NR) to the n file offsets offs[] of the ELF file
 * path in one uprobe.multi link (Linux 6.6), offset i's hits carrying
 * cookies[i]; pid > 0: in that process alone, else in every process;
 * ret: on their returns instead.  Returns the link's fd (closing it
 * detaches every site) or -errno (EINVAL or EOPNOTSUPP: a kernel without
 * uprobe.multi). */
int bpf_uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs,
			  const uint64_t *cookies, size_t n, pid_t pid, bool ret);
/* A program of type that returns 0, loaded with the expected attach
 * type and BTF id given (0: none): its fd, or -errno when this kernel
 * refuses such a program there (how fay asks what a kernel can do, as
 * libbpf's feature probes do).  The caller closes the fd. */
int bpf_trivial_prog(enum bpf_prog_type type, enum bpf_attach_type expected,
		     uint32_t attach_btf_id);
/* Attach the tracing program prog_fd (fentry/fexit: its BTF id given at
 * load) through a raw tracepoint link.  Returns the link's fd (closing
 * it detaches) or -errno. */
int bpf_raw_tp_link(int prog_fd);
/* Does this kernel have BPF ring buffers (Linux 5.8)? */
bool bpf_have_ringbuf(void);
/* Does this kernel let a program of type read the current task's saved
 * user registers (bpf_task_pt_regs(bpf_get_current_task_btf()), Linux
 * 5.15 with BTF, GPL)?  0, or the -errno of the refused load.  x86-64. */
int bpf_have_task_regs(enum bpf_prog_type type);
/* Does this kernel make uprobe.multi links?  As libbpf probes it: a link
 * on "/" (no regular file) fails with EBADF where it does, with EINVAL
 * where it does not (before Linux 6.6). */
bool bpf_have_uprobe_multi(void);
/* A plain sentence for an EPERM from the bpf() syscall. */
const char *bpf_privilege_hint(void);

#endif
