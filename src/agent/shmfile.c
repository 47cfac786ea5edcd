// SPDX-License-Identifier: MIT
/*
 * A process's shm file, seen from the agent: nothing in it is trusted.
 * The header is checked field by field against the file's real size and
 * sane limits before a single offset is followed; every read of the
 * mapping runs under shm_guarded(), since the process may shrink the file.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/shmfile.h"
#include "common/spanrec.h"
#include "common/atomic.h"
#include "probe/procroot.h"

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -EBADMSG; } while (0)

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* Does the string field of size n end with a NUL? */
static int has_nul(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

int shm_name_parse(const char *name, uint32_t *pid, uint64_t *instance)
{
	const char *p = name;
	char *end;
	unsigned long long v;
	size_t plen = strlen(FAY_SHM_PREFIX), slen = strlen(FAY_SHM_SUFFIX);
	size_t n = strlen(name);

	if (n <= plen + slen || strncmp(p, FAY_SHM_PREFIX, plen) ||
	    strcmp(name + n - slen, FAY_SHM_SUFFIX))
		return -EINVAL;
	p += plen;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || *end != '-' || !v || v > UINT32_MAX)
		return -EINVAL;
	*pid = (uint32_t)v;
	p = end + 1;
	if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
	      (*p >= 'A' && *p <= 'F')))
		return -EINVAL;
	errno = 0;
	v = strtoull(p, &end, 16);
	if (errno || end != name + n - slen || end - p > 16)
		return -EINVAL;
	*instance = v;
	return 0;
}

int shm_hdr_validate(const struct fay_shm_hdr *h, uint64_t st_size,
		     const char *name, char *err, size_t errlen)
{
	uint64_t rings_end, pool_end, want_stride;
	uint32_t state;

	if (st_size < FAY_SHM_HDR_SIZE) {
		snprintf(err, errlen, "file is %" PRIu64 " bytes, smaller than the %u-byte header",
			 st_size, FAY_SHM_HDR_SIZE);
		return -EAGAIN;
	}
	state = smp_load_acquire(&h->state);
	if (h->magic == 0 && state == FAY_SHM_INIT) {
		snprintf(err, errlen, "header not written yet");
		return -EAGAIN;
	}
	if (h->magic != FAY_SHM_MAGIC)
		BAD("magic is 0x%016" PRIx64 ", want 0x%016" PRIx64, h->magic, FAY_SHM_MAGIC);
	if (h->version < FAY_SHM_VERSION_MIN || h->version > FAY_SHM_VERSION)
		BAD("version is %u, this agent reads versions %u to %u", h->version,
		    FAY_SHM_VERSION_MIN, FAY_SHM_VERSION);
	if (state == FAY_SHM_INIT) {
		snprintf(err, errlen, "state is INIT (being set up)");
		return -EAGAIN;
	}
	if (state != FAY_SHM_LIVE && state != FAY_SHM_CLOSED)
		BAD("state is %u, not one of INIT/LIVE/CLOSED", state);
	if (h->hdr_size != FAY_SHM_HDR_SIZE)
		BAD("hdr_size is %u, want %u", h->hdr_size, FAY_SHM_HDR_SIZE);
	if (h->file_size != st_size)
		BAD("file_size is %" PRIu64 " but the file is %" PRIu64 " bytes",
		    h->file_size, st_size);
	if (h->file_size > SHM_MAX_FILE_SIZE)
		BAD("file_size is %" PRIu64 ", above the %" PRIu64 "-byte limit",
		    h->file_size, SHM_MAX_FILE_SIZE);
	if (!h->pid)
		BAD("pid is 0");
	if (!h->nrings || h->nrings > SHM_MAX_RINGS)
		BAD("nrings is %u, want 1..%u", h->nrings, SHM_MAX_RINGS);
	if (!is_pow2(h->ring_slots) || h->ring_slots < 2 ||
	    h->ring_slots > SHM_MAX_RING_SLOTS)
		BAD("ring_slots is %u, want a power of two in 2..%u", h->ring_slots,
		    SHM_MAX_RING_SLOTS);
	want_stride = FAY_RING_CTL_SIZE + (uint64_t)h->ring_slots * FAY_SLOT_SIZE;
	if (h->ring_stride != want_stride)
		BAD("ring_stride is %" PRIu64 ", want %" PRIu64 " for %u slots",
		    h->ring_stride, want_stride, h->ring_slots);
	if (h->rings_off < FAY_SHM_HDR_SIZE || h->rings_off % FAY_SLOT_SIZE)
		BAD("rings_off is %" PRIu64 ", want a multiple of %u at or after the header",
		    h->rings_off, FAY_SLOT_SIZE);
	/* No overflow: every factor is bounded above. */
	rings_end = h->rings_off + (uint64_t)h->nrings * h->ring_stride;
	if (h->rings_off > h->file_size || rings_end > h->file_size)
		BAD("rings (rings_off %" PRIu64 " + %u x %" PRIu64 ") end at %" PRIu64
		    ", past the end of the file (%" PRIu64 ")", h->rings_off, h->nrings,
		    h->ring_stride, rings_end, h->file_size);
	if (h->npool > SHM_MAX_POOL)
		BAD("npool is %u, above the limit %u", h->npool, SHM_MAX_POOL);
	if (h->npool) {
		if (h->pool_stride < sizeof(struct fay_pool_slot) ||
		    h->pool_stride > SHM_MAX_POOL_STRIDE || h->pool_stride % 8)
			BAD("pool_stride is %u, want a multiple of 8 in %zu..%u",
			    h->pool_stride, sizeof(struct fay_pool_slot),
			    SHM_MAX_POOL_STRIDE);
		if (h->pool_off < FAY_SHM_HDR_SIZE || h->pool_off % 8)
			BAD("pool_off is %" PRIu64 ", want a multiple of 8 at or after the header",
			    h->pool_off);
		pool_end = h->pool_off + (uint64_t)h->npool * h->pool_stride;
		if (h->pool_off > h->file_size || pool_end > h->file_size)
			BAD("pool (pool_off %" PRIu64 " + %u x %u) ends at %" PRIu64
			    ", past the end of the file (%" PRIu64 ")", h->pool_off,
			    h->npool, h->pool_stride, pool_end, h->file_size);
		if (h->pool_off < rings_end && h->rings_off < pool_end)
			BAD("pool [%" PRIu64 ", %" PRIu64 ") overlaps the rings [%" PRIu64
			    ", %" PRIu64 ")", h->pool_off, pool_end, h->rings_off, rings_end);
	}
	if (!has_nul(h->service, sizeof(h->service)))
		BAD("service is not NUL-terminated within its %zu bytes", sizeof(h->service));
	if (!has_nul(h->ip, sizeof(h->ip)))
		BAD("ip is not NUL-terminated within its %zu bytes", sizeof(h->ip));
	if (name) {
		uint32_t pid;
		uint64_t inst;

		if (shm_name_parse(name, &pid, &inst))
			BAD("file name is not fay-<pid>-<instance hex>.shm");
		if (pid != h->pid)
			BAD("pid is %u but the file name says %u", h->pid, pid);
		if (inst != h->instance)
			BAD("instance is %016" PRIx64 " but the file name says %016" PRIx64,
			    h->instance, inst);
	}
	return 0;
}

uint32_t shm_pool_open_count(const void *base, const struct fay_shm_hdr *h)
{
	const uint8_t *p = (const uint8_t *)base + h->pool_off;
	uint32_t n = 0;

	for (uint32_t i = 0; i < h->npool; i++, p += h->pool_stride) {
		const struct fay_pool_slot *s = (const void *)p;

		if (READ_ONCE(s->state) == FAY_POOL_OPEN)
			n++;
	}
	return n;
}

int shm_pid_maps_file(uint32_t pid, dev_t dev, ino_t ino)
{
	char path[64], line[1024];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT || errno == ESRCH ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long inode;
		unsigned maj, min;

		/* start-end perms offset maj:min inode path */
		if (sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &maj, &min, &inode) != 3)
			continue;
		if (inode == (unsigned long long)ino && maj == major(dev) &&
		    min == minor(dev)) {
			found = 1;
			break;
		}
		/* Long lines (paths) continue: skip the rest of them. */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return found;
}

uint32_t shm_owner_pid(uint32_t vpid, dev_t dev, ino_t ino)
{
	struct dirent *de;
	uint32_t found = 0;
	DIR *d;
	int own = shm_pid_maps_file(vpid, dev, ino);

	if (own == 1)
		return vpid;
	d = opendir("/proc");
	if (!d)
		return own < 0 ? vpid : 0;
	while (!found && (de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid == vpid || pid > UINT32_MAX)
			continue;
		if (proc_vpid((pid_t)pid) == (pid_t)vpid &&
		    shm_pid_maps_file((uint32_t)pid, dev, ino) == 1)
			found = (uint32_t)pid;
	}
	closedir(d);
	/* vpid's maps unreadable, and no container's process has it */
	return found ? found : own < 0 ? vpid : 0;
}

/* ---- SIGBUS from a shrunk file ---------------------------------------------- */

static __thread sigjmp_buf *volatile bus_guard;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = bus_guard;

	(void)si;
	(void)uc;
	if (jb) {
		bus_guard = NULL;
		siglongjmp(*jb, 1);
	}
	/* Not a guarded read: die of it, as without the handler. */
	signal(sig, SIG_DFL);
	raise(sig);
}

int shm_guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	/* SA_NODEFER: siglongjmp leaves the handler without restoring the
	 * mask (sigsetjmp(.., 0) costs no system call), so SIGBUS must not
	 * be blocked while it runs. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) ? -errno : 0;
}

int shm_guarded(int (*fn)(void *arg), void *arg)
{
	sigjmp_buf jb;
	sigjmp_buf *volatile prev = bus_guard;
	int ret;

	if (sigsetjmp(jb, 0)) {
		bus_guard = prev;
		return -EFAULT;
	}
	bus_guard = &jb;
	ret = fn(arg);
	bus_guard = prev;
	return ret;
}

/* ---- owners ----------------------------------------------------------------- */

int shm_owner_ok(uint32_t pid, uid_t uid, char *err, size_t errlen)
{
	char path[32];
	struct stat st;

	if (uid == 0 || uid == geteuid())
		return 1;
	snprintf(path, sizeof(path), "/proc/%u", pid);
	if (stat(path, &st))
		return 1;       /* not running: drained and removed */
	if (st.st_uid == uid)
		return 1;
	snprintf(err, errlen, "owned by uid %u, but process %u runs as uid %u "
		 "(fay agent --shm-any-owner accepts it)", (unsigned)uid, pid,
		 (unsigned)st.st_uid);
	return 0;
}
