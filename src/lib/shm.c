// SPDX-License-Identifier: MIT
/*
 * libfay: the process's shm file (include/fay/ring.h), fay_init(), the
 * rings threads claim, and what happens at fork() and exit.
 *
 * The file is built under a hidden temporary name and renamed into place
 * once its header says LIVE, so the agent (inotify IN_MOVED_TO/IN_CREATE
 * on $FAY_SHM_DIR) only ever opens complete files.  It is never unlinked
 * here: the agent drains it after the process is gone and removes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rand.h"
#include "lib/libfay.h"

struct lib_proc lib = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.sample_thresh = UINT64_MAX,   /* record every root until told */
};
__thread struct lib_tls lib_t __attribute__((tls_model("initial-exec")));
__thread struct fay_fast_tls fay_fast_tls_1 __attribute__((tls_model("initial-exec")));
uint32_t fay_fast_gen = 1;

uint32_t lib_gettid_slow(void)
{
	lib_t.tid = (uint32_t)syscall(SYS_gettid);
	return lib_t.tid;
}

/*
 * Parse a whole decimal number in [0, max] (no sign, no junk).  Returns 0
 * or -EINVAL.
 */
int lib_parse_uint(const char *s, unsigned long long max, unsigned long long *v)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || *end || *v > max)
		return -EINVAL;
	return 0;
}

void lib_flush_counters(void)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

	/* the roots the skip budget passed so far */
	lib_t.unsampled += lib_t.skip_set - lib_skip(&fay_fast_tls_1);
	lib_t.skip_set = lib_skip(&fay_fast_tls_1);
	if (h && lib_t.unsampled)
		atomic_add(&h->spans_unsampled, lib_t.unsampled);
	if (h && lib_t.started)
		atomic_add(&h->spans_started, lib_t.started);
	lib_t.unsampled = 0;
	lib_t.started = 0;
}

/* Read the geometry overrides into cfg.  Returns 0 or -EINVAL. */
static int read_env_geometry(struct lib_cfg *cfg)
{
	unsigned long long v;
	const char *e;

	cfg->nrings = LIB_NRINGS_DEF;
	cfg->ring_slots = LIB_RING_KB_DEF * 1024 / FAY_SLOT_SIZE;
	cfg->npool = LIB_NPOOL_DEF;

	e = getenv("FAY_RINGS");
	if (e) {
		if (lib_parse_uint(e, LIB_NRINGS_MAX, &v) || !v)
			return -EINVAL;
		cfg->nrings = (uint32_t)v;
	}
	e = getenv("FAY_RING_KB");
	if (e) {
		/* whole slots, a power of two of them */
		if (lib_parse_uint(e, LIB_RING_KB_MAX, &v) || v < LIB_RING_KB_MIN ||
		    (v & (v - 1)))
			return -EINVAL;
		cfg->ring_slots = (uint32_t)(v * 1024 / FAY_SLOT_SIZE);
	}
	e = getenv("FAY_POOL");
	if (e) {
		if (lib_parse_uint(e, LIB_NPOOL_MAX, &v) || !v)
			return -EINVAL;
		cfg->npool = (uint32_t)v;
	}
	e = getenv("FAY_SHM_DIR");
	if (!e || !*e)
		e = "/dev/shm";
	if (strlen(e) >= sizeof(cfg->dir))
		return -ENAMETOOLONG;
	strcpy(cfg->dir, e);
	return 0;
}

static void hdr_set_endpoint(struct fay_shm_hdr *h, const struct lib_cfg *c)
{
	/* The agent may read these while they change: a torn name is
	 * possible only during a fay_init() call, and the strings stay
	 * NUL-terminated throughout (the last byte is never written). */
	memset(h->service, 0, sizeof(h->service));
	memcpy(h->service, c->service, strnlen(c->service, sizeof(h->service) - 1));
	memset(h->ip, 0, sizeof(h->ip));
	memcpy(h->ip, c->ip, strnlen(c->ip, sizeof(h->ip) - 1));
	h->port = c->port;
}

/*
 * Create, size, map and fill the file, then rename it into place.  Called
 * with lib.lock held.  Returns 0 or -errno (nothing left behind).
 */
static int create_file(void)
{
	const struct lib_cfg *c = &lib.cfg;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct fay_shm_hdr *h;
	uint64_t instance, pool_off, cur_off, rings_off, ring_stride, size;
	void *base = MAP_FAILED;
	int fd = -1, err;
	pid_t pid = getpid();

	err = rand_bytes(&instance, sizeof(instance));
	if (err)
		instance = rand_u64();
	pool_off = FAY_SHM_HDR_SIZE;
	cur_off = pool_off + (uint64_t)c->npool * LIB_POOL_STRIDE;
	cur_off = (cur_off + 4095) & ~(uint64_t)4095;
	rings_off = cur_off + (uint64_t)LIB_NCUR * FAY_CUR_CELL_SIZE;
	rings_off = (rings_off + 4095) & ~(uint64_t)4095;
	ring_stride = FAY_RING_CTL_SIZE + (uint64_t)c->ring_slots * FAY_SLOT_SIZE;
	size = rings_off + (uint64_t)c->nrings * ring_stride;

	if (mkdir(c->dir, 0700) && errno != EEXIST)
		return -errno;
	if (snprintf(tmp, sizeof(tmp), "%s/.fay-tmp-%d-%016llx", c->dir, (int)pid,
		     (unsigned long long)instance) >= (int)sizeof(tmp) ||
	    snprintf(final, sizeof(final), "%s/" FAY_SHM_PREFIX "%d-%016llx" FAY_SHM_SUFFIX,
		     c->dir, (int)pid, (unsigned long long)instance) >= (int)sizeof(final))
		return -ENAMETOOLONG;

	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* whatever the umask: the owner reads and writes, no one else */
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)size)) {
		err = -errno;
		goto err_out;
	}
	/* The header, the pool and the current-span cells are written from
	 * now on: their pages must
	 * exist (rings are reserved when claimed, lib_ring_claim). */
	err = posix_fallocate(fd, 0, (off_t)rings_off);
	if (err) {
		err = -err;
		goto err_out;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		goto err_out;
	}
	h = base;
	h->magic = FAY_SHM_MAGIC;
	h->version = FAY_SHM_VERSION;
	h->hdr_size = FAY_SHM_HDR_SIZE;
	h->file_size = size;
	h->instance = instance;
	h->pid = (uint32_t)pid;
	h->start_ns = clock_realtime_ns();
	h->rings_off = rings_off;
	h->ring_stride = ring_stride;
	h->nrings = c->nrings;
	h->ring_slots = c->ring_slots;
	h->pool_off = pool_off;
	h->npool = c->npool;
	h->pool_stride = LIB_POOL_STRIDE;
	h->cur_off = cur_off;
	h->ncur = LIB_NCUR;
	h->cur_stride = FAY_CUR_CELL_SIZE;
	hdr_set_endpoint(h, c);
	h->sample_one_in = 0;
	if (!lib.rate_mode && lib.sample_thresh)
		h->sample_one_in = lib.sample_thresh == UINT64_MAX ? 1 :
				   (uint32_t)(UINT64_MAX / lib.sample_thresh);
	smp_store_release(&h->state, FAY_SHM_LIVE);
	if (rename(tmp, final)) {
		err = -errno;
		goto err_out;
	}
	lib.fd = fd;
	memset(lib.ring_reserved, 0, sizeof(lib.ring_reserved));
	lib.base = base;
	lib.size = size;
	lib.pool = (uint8_t *)base + pool_off;
	lib.npool = c->npool;
	lib.pool_stride = LIB_POOL_STRIDE;
	lib.item_cap = LIB_POOL_STRIDE - (uint32_t)sizeof(struct fay_pool_slot);
	lib.cur = (struct fay_cur_cell *)((uint8_t *)base + cur_off);
	lib.rings = (uint8_t *)base + rings_off;
	lib.ring_stride = ring_stride;
	lib.nrings = c->nrings;
	lib.ring_slots = c->ring_slots;
	lib.free_head = 0;
	lib.fresh = 0;
	smp_store_release(&lib.hdr, h);
	return 0;

err_out:
	if (base != MAP_FAILED)
		munmap(base, size);
	close(fd);
	unlink(tmp);
	return err;
}

/* A fork child's first recording call: make the child's own file. */
struct fay_shm_hdr *lib_hdr_slow(void)
{
	pthread_mutex_lock(&lib.lock);
	if (lib.need_file && !lib.hdr) {
		if (create_file())
			lib.recording = 0;  /* give up quietly: context still flows */
		lib.need_file = 0;
	}
	pthread_mutex_unlock(&lib.lock);
	return smp_load_acquire(&lib.hdr);
}

/* Thread exit: give the ring, the current-span cell and the cached
 * handles back. */
static void thread_exit(void *arg)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

	(void)arg;
	lib_cur_release();
	lib_flush_counters();
	lib_pool_spill_all();
	if (lib_t.ring && h) {
		struct fay_ring_ctl *ctl = lib_t.prod.ctl;

		lib_t.ring = 0;
		smp_store_release(&ctl->owner_tid, 0);
	}
	lib_t.ring = 0;
}

/*
 * Make sure ring r's pages exist before anything in it is read or written.
 * Returns 0, or -errno (no room: ENOSPC).  Threads may race here: the
 * reservation is idempotent.
 */
static int ring_reserve(uint32_t r)
{
	uint64_t *w = &lib.ring_reserved[r / 64], bit = UINT64_C(1) << (r % 64);
	off_t off = (off_t)((uint64_t)(lib.rings - lib.base) + r * lib.ring_stride);
	int err;

	if (READ_ONCE(*w) & bit)
		return 0;
	err = posix_fallocate(lib.fd, off, (off_t)lib.ring_stride);
	if (err)
		return -err;
	__atomic_fetch_or(w, bit, __ATOMIC_RELEASE);
	return 0;
}

/* Make ring r, owned by the calling thread now, the thread's. */
static struct ring_prod *ring_take(uint32_t r, struct fay_ring_ctl *ctl)
{
	ring_prod_init(&lib_t.prod, ctl, lib.ring_slots);
	lib_t.ring = r + 1;
	if (!lib_t.key_set) {
		/* any non-NULL value arms the destructor */
		pthread_setspecific(lib.key, &lib_t);
		lib_t.key_set = 1;
	}
	return &lib_t.prod;
}

static inline struct fay_ring_ctl *ring_ctl(uint32_t r)
{
	return (struct fay_ring_ctl *)(lib.rings + r * lib.ring_stride);
}

static inline int ring_is_reserved(uint32_t r)
{
	return !!(smp_load_acquire(&lib.ring_reserved[r / 64]) & (UINT64_C(1) << (r % 64)));
}

static inline int ring_own(struct fay_ring_ctl *ctl, uint32_t tid)
{
	uint32_t zero = 0;

	return !READ_ONCE(ctl->owner_tid) && atomic_cas(&ctl->owner_tid, &zero, tid);
}

/*
 * A ring for the calling thread.  A ring another thread of the process
 * used and gave back is taken first: its pages are reserved and already
 * mapped, where a ring never used costs its reservation (~2.6 ms for 1 MiB
 * here) and a page fault per 4 KiB written (~1 us a span over its first
 * ~10000 spans): a process that starts threads, a pool that renews them,
 * paid that at each new thread (bench/RESULTS.md, "Two threads").
 */
struct ring_prod *lib_ring_claim(void)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);
	uint32_t tid = lib_gettid(), n, i;
	int no_room = 0;

	if (!h)
		return NULL;
	/* After a failed reservation, drop LIB_NO_ROOM_RETRY spans (counted
	 * in lost_no_room by the caller) before trying again. */
	if (lib_t.no_room && --lib_t.no_room)
		return NULL;
	n = lib.nrings;
	for (i = 0; i < n; i++) {
		uint32_t r = (tid + i) % n;

		if (ring_is_reserved(r) && ring_own(ring_ctl(r), tid))
			return ring_take(r, ring_ctl(r));
	}
	for (i = 0; i < n; i++) {
		uint32_t r = (tid + i) % n;

		if (!ring_is_reserved(r)) {
			/* after one failure, don't try the others */
			if (no_room || ring_reserve(r)) {
				no_room = 1;
				continue;
			}
		}
		if (ring_own(ring_ctl(r), tid))
			return ring_take(r, ring_ctl(r));
	}
	/* Every ring owned (lost_no_ring), or the free ones could not be
	 * reserved (lost_no_room). */
	if (no_room)
		lib_t.no_room = LIB_NO_ROOM_RETRY;
	return NULL;
}

/* fork(): keep lib.lock consistent across the fork. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&lib.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&lib.lock);
}

/*
 * The child must never write into the parent's file: a ring the forking
 * thread owns would then have two producers.  Replace the mapping with
 * zero pages at the same address (handles the child inherited become
 * inert instead of dangling), forget the thread's ring and cached
 * handles, and make the child's own file on its first recorded span.
 */
static void atfork_child(void)
{
	if (lib.base) {
		mmap(lib.base, lib.size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		lib.hdr = NULL;
		lib.base = NULL;
		lib.pool = NULL;
		lib.cur = NULL;
		lib.rings = NULL;
		lib.need_file = lib.recording;
	}
	if (lib.fd >= 0)
		close(lib.fd);  /* the parent's file */
	lib.fd = -1;
	lib.free_head = 0;
	lib.fresh = 0;
	lib_t.ring = 0;
	lib_t.ncache = 0;
	lib_t.tid = 0;
	lib_t.unsampled = 0;
	lib_t.started = 0;
	lib_t.nest = 0;
	lib_t.no_room = 0;
	lib_t.rng = 0;          /* reseed: the child's samples are its own */
	lib_set_skip(&fay_fast_tls_1, 0); /* and so is its next sampled root */
	lib_t.skip_set = 0;
	fay_fast_tls_1.gen = 0;
	lib_t.clk_limit = 0;    /* ns until the child's own file has a TSC line */
	pthread_mutex_unlock(&lib.lock);
}

/* Tell the agent sooner than the process's death would. */
static void at_exit(void)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

	lib_flush_counters();
	if (h)
		smp_store_release(&h->state, FAY_SHM_CLOSED);
}

__attribute__((constructor)) static void lib_ctor(void)
{
	pthread_key_create(&lib.key, thread_exit);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int fay_init(const char *service, const char *ip, int port)
{
	static int atexit_done;
	struct lib_cfg cfg;
	const char *e;
	int err = 0, disable = 0, record_all;

	if (!service || !*service || strlen(service) >= sizeof(cfg.service) ||
	    (ip && strlen(ip) >= sizeof(cfg.ip)) || port < 0 || port > 65535)
		return fay_err(-EINVAL);

	memset(&cfg, 0, sizeof(cfg));
	err = read_env_geometry(&cfg);
	if (err)
		return fay_err(err);
	e = getenv("FAY_SERVICE");
	if (e && *e) {
		if (strlen(e) >= sizeof(cfg.service))
			return fay_err(-EINVAL);
		service = e;
	}
	strcpy(cfg.service, service);
	if (ip)
		strcpy(cfg.ip, ip);
	cfg.port = (uint16_t)port;
	e = getenv("FAY_DISABLE");
	if (e && *e && strcmp(e, "0"))
		disable = 1;
	e = getenv("FAY_RECORD");
	if (e && *e && strcmp(e, "all") && strcmp(e, "sampled"))
		return fay_err(-EINVAL);
	record_all = e && !strcmp(e, "all");
	lib_clock_init();

	pthread_mutex_lock(&lib.lock);
	if (READ_ONCE(lib.record_all) != record_all) {
		WRITE_ONCE(lib.record_all, record_all);
		lib_sample_changed();
	}
	e = getenv("FAY_SAMPLE");
	if (e) {
		err = lib_parse_sample(e);
		if (err)
			goto out;
		lib.env_sampling = 1;
	}
	if (lib.hdr) {
		/* already recording: only the endpoint changes */
		memcpy(lib.cfg.service, cfg.service, sizeof(cfg.service));
		memcpy(lib.cfg.ip, cfg.ip, sizeof(cfg.ip));
		lib.cfg.port = cfg.port;
		hdr_set_endpoint(lib.hdr, &lib.cfg);
		WRITE_ONCE(lib.recording, !disable);
		goto out;
	}
	lib.cfg = cfg;
	if (disable) {
		WRITE_ONCE(lib.recording, 0);
		goto out;
	}
	err = create_file();
	if (err)
		goto out;
	lib.need_file = 0;      /* a fork child that called fay_init itself */
	WRITE_ONCE(lib.recording, 1);
	if (!atexit_done) {
		atexit(at_exit);
		atexit_done = 1;
	}
out:
	if (!err)
		WRITE_ONCE(lib.inited, 1);
	pthread_mutex_unlock(&lib.lock);
	return fay_err(err);
}
