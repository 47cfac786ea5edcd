// SPDX-License-Identifier: MIT
/* The agent's view of a shm file: every header field checked, named in the
 * error with its value; not-ready files told apart from corrupt ones;
 * open span handles counted; ownership read from /proc/<pid>/maps. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/shmfile.h"
#include "common/spanrec.h"
#include "test.h"

#define NRINGS 4u
#define SLOTS  64u
#define NPOOL  8u
#define STRIDE 1024u

static uint64_t good(struct fay_shm_hdr *h)
{
	uint64_t size;

	memset(h, 0, sizeof(*h));
	h->magic = FAY_SHM_MAGIC;
	h->version = FAY_SHM_VERSION;
	h->hdr_size = FAY_SHM_HDR_SIZE;
	h->instance = 0x00000000deadbeefull;
	h->pid = 1234;
	h->state = FAY_SHM_LIVE;
	h->pool_off = FAY_SHM_HDR_SIZE;
	h->npool = NPOOL;
	h->pool_stride = STRIDE;
	h->rings_off = FAY_SHM_HDR_SIZE + NPOOL * STRIDE;
	h->nrings = NRINGS;
	h->ring_slots = SLOTS;
	h->ring_stride = FAY_RING_CTL_SIZE + SLOTS * FAY_SLOT_SIZE;
	size = h->rings_off + NRINGS * h->ring_stride;
	h->file_size = size;
	strcpy(h->service, "svc");
	strcpy(h->ip, "10.0.0.1");
	return size;
}

#define NAME "fay-1234-00000000deadbeef.shm"

/* Damage one field; expect -EBADMSG and a message containing want. */
#define CASE(what, stmt, want) do {						\
	struct fay_shm_hdr h;							\
	uint64_t size = good(&h);						\
	char err[256] = "";							\
	int r;									\
	stmt;									\
	r = shm_hdr_validate(&h, size, NAME, err, sizeof(err));		\
	ok(r == -EBADMSG && strstr(err, want), "%s: rejected naming \"%s\" (%s)", \
	   what, want, err);							\
} while (0)

static void test_corrupt(void)
{
	CASE("magic", h.magic = 0x1234, "magic is 0x0000000000001234");
	CASE("version", h.version = 9, "version is 9");
	CASE("version 3 (newer than this agent)", h.version = FAY_SHM_VERSION + 1,
	     "version is 3, this agent reads versions 1 to 2");
	CASE("version 0", h.version = 0, "version is 0");
	CASE("state", h.state = 7, "state is 7");
	CASE("hdr_size", h.hdr_size = 512, "hdr_size is 512");
	CASE("file_size", h.file_size += 4096, "file_size is");
	CASE("file_size vs fstat", size -= 64, "but the file is");
	CASE("pid", h.pid = 0, "pid is 0");
	CASE("nrings 0", h.nrings = 0, "nrings is 0");
	CASE("nrings huge", h.nrings = 100000, "nrings is 100000");
	CASE("ring_slots not pow2", h.ring_slots = 96, "ring_slots is 96");
	CASE("ring_slots 0", h.ring_slots = 0, "ring_slots is 0");
	CASE("ring_slots 1", (h.ring_slots = 1, h.ring_stride = FAY_RING_CTL_SIZE + 64),
	     "ring_slots is 1");
	CASE("ring_stride", h.ring_stride += 64, "ring_stride is");
	CASE("rings_off inside header", h.rings_off = 64, "rings_off is 64");
	CASE("rings_off unaligned", h.rings_off += 8, "rings_off is");
	CASE("rings past the end", h.nrings = NRINGS + 1, "past the end of the file");
	CASE("rings_off huge", h.rings_off = UINT64_C(1) << 62, "past the end");
	CASE("npool huge", h.npool = 1u << 30, "npool is");
	CASE("pool_stride small", h.pool_stride = 8, "pool_stride is 8");
	CASE("pool_stride odd", h.pool_stride = STRIDE + 4, "pool_stride is");
	CASE("pool_off inside header", h.pool_off = 0, "pool_off is 0");
	CASE("pool past the end", (h.pool_off = h.rings_off + NRINGS * h.ring_stride - 1024,
				   h.npool = 2), "pool");
	CASE("pool overlaps rings", h.npool = NPOOL + 1, "overlaps the rings");
	CASE("service unterminated", memset(h.service, 'a', sizeof(h.service)),
	     "service is not NUL-terminated");
	CASE("ip unterminated", memset(h.ip, '1', sizeof(h.ip)), "ip is not NUL-terminated");
	CASE("pid vs name", h.pid = 99, "pid is 99 but the file name says 1234");
	CASE("instance vs name", h.instance = 5, "the file name says 00000000deadbeef");
}

static void test_validate(void)
{
	struct fay_shm_hdr h;
	uint64_t size = good(&h);
	char err[256] = "";

	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), 0, "a good header passes (%s)", err);
	is_int(shm_hdr_validate(&h, size, NULL, err, sizeof(err)), 0, "name check optional");
	h.version = 1;
	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), 0,
	       "a version-1 file (records in ns, no TSC line) is still read (%s)", err);

	/* Not ready is not corrupt. */
	good(&h);
	h.state = FAY_SHM_INIT;
	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), -EAGAIN, "INIT: not ready");
	memset(&h, 0, sizeof(h));
	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), -EAGAIN,
	       "all-zero header: not ready");
	is_int(shm_hdr_validate(&h, 100, NAME, err, sizeof(err)), -EAGAIN,
	       "smaller than a header: not ready");
	good(&h);
	h.state = FAY_SHM_CLOSED;
	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), 0, "CLOSED is consumable");
	good(&h);
	h.npool = 0;
	h.pool_stride = 0;
	is_int(shm_hdr_validate(&h, size, NAME, err, sizeof(err)), 0, "no pool is fine");
}

static void test_names(void)
{
	uint32_t pid = 0;
	uint64_t inst = 0;

	is_int(shm_name_parse("fay-42-00ab.shm", &pid, &inst), 0, "parse a name");
	ok(pid == 42 && inst == 0xab, "pid and instance read");
	is_int(shm_name_parse("fay-42-00ab.shmx", &pid, &inst), -EINVAL, "wrong suffix");
	is_int(shm_name_parse(".fay-tmp-42-00ab", &pid, &inst), -EINVAL, "temporary name");
	is_int(shm_name_parse("fay--00ab.shm", &pid, &inst), -EINVAL, "no pid");
	is_int(shm_name_parse("fay-0-00ab.shm", &pid, &inst), -EINVAL, "pid 0");
	is_int(shm_name_parse("fay-42-.shm", &pid, &inst), -EINVAL, "no instance");
	is_int(shm_name_parse("fay-42-xyz.shm", &pid, &inst), -EINVAL, "instance not hex");
	is_int(shm_name_parse("fay-42-00112233445566778.shm", &pid, &inst), -EINVAL,
	       "instance longer than 64 bits");
	is_int(shm_name_parse("fay-99999999999-1.shm", &pid, &inst), -EINVAL, "pid too big");
}

static void test_pool_and_owner(void)
{
	char path[] = "/tmp/fay-test-shm-XXXXXX";
	struct fay_shm_hdr h;
	uint64_t size = good(&h);
	struct stat st;
	uint8_t *base;
	int fd = mkstemp(path);

	ok(fd >= 0 && !ftruncate(fd, (off_t)size), "temp shm file");
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ok(base != MAP_FAILED, "mapped");
	memcpy(base, &h, sizeof(h));
	for (unsigned i = 0; i < NPOOL; i += 3) {
		struct fay_pool_slot *s = (void *)(base + h.pool_off + i * STRIDE);

		s->state = FAY_POOL_OPEN;
	}
	is_int(shm_pool_open_count(base, &h), 3, "open handles counted (0, 3, 6)");
	fstat(fd, &st);
	is_int(shm_pid_maps_file((uint32_t)getpid(), st.st_dev, st.st_ino), 1,
	       "this process maps the file");
	munmap(base, size);
	is_int(shm_pid_maps_file((uint32_t)getpid(), st.st_dev, st.st_ino), 0,
	       "after munmap it does not");
	is_int(shm_pid_maps_file(0x7ffffff0u, st.st_dev, st.st_ino), 0,
	       "a pid that does not exist maps nothing");
	close(fd);
	unlink(path);
}

int main(void)
{
	test_validate();
	test_corrupt();
	test_names();
	test_pool_and_owner();
	return test_done();
}
