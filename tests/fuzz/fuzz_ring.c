// SPDX-License-Identifier: MIT
/*
 * What the agent reads from a traced process's shared memory, which the
 * process (or anyone who can write the file) controls: a shm file header
 * (shm_hdr_validate), and a ring (its control block and slots) drained
 * the way the agent drains it, every delivered record decoded as a span
 * record.  The first byte picks the ring size (2 to 256 slots) and
 * whether the rest is a header or a ring.  Properties: the consumer
 * delivers only record types it knows and payloads that fit the ring;
 * delivered + lost never runs backwards across a second drain.
 */
#include <string.h>

#include "agent/shmfile.h"
#include "common/ring/ring.h"
#include "common/spanrec.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

struct seen {
	uint32_t nslots;
	unsigned n;
};

static int on_rec(void *ctx, uint16_t type, const void *payload, uint32_t len, uint64_t rec_no)
{
	struct seen *s = ctx;
	struct spanrec r;
	struct spanrec_item it;
	uint32_t off = 0;
	char err[256];

	FUZZ_CHECK(ring_rec_type_known(type), "record type %u delivered", type);
	FUZZ_CHECK(len <= ring_max_payload(s->nslots), "a %u-byte record from %u slots", len,
		   s->nslots);
	if (spanrec_decode(payload, len, &r, err, sizeof(err)) >= 0)
		while (spanrec_next(&r, &off, &it) == 1)
			;
	s->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = { .nslots = 2u << ((data && size ? data[0] : 0) & 7) };
	size_t bytes = FAY_RING_CTL_SIZE + (size_t)s.nslots * FAY_SLOT_SIZE;
	struct ring_cons c;
	void *mem;

	if (size < 1 || size > 65536)
		return 0;
	if (data[0] & 0x80) {
		/* a shm file header, in a buffer as large as the file claims
		 * to be (the header's own st_size check is under test) */
		struct fay_shm_hdr h = { 0 };
		char err[256];

		memcpy(&h, data + 1, size - 1 < sizeof(h) ? size - 1 : sizeof(h));
		shm_hdr_validate(&h, size - 1, "fay-1-0000000000000001.shm", err, sizeof(err));
		shm_hdr_validate(&h, UINT64_MAX, NULL, err, sizeof(err));
		return 0;
	}
	mem = aligned_alloc(64, bytes);
	if (!mem)
		return 0;
	memset(mem, 0, bytes);
	memcpy(mem, data + 1, size - 1 < bytes ? size - 1 : bytes);
	if (!ring_cons_init(&c, mem, s.nslots, 0, 0)) {
		uint64_t lost1, lost2;

		ring_drain(&c, on_rec, &s, 0);
		lost1 = c.lost;
		ring_drain(&c, on_rec, &s, 0);
		lost2 = c.lost;
		FUZZ_CHECK(lost2 >= lost1, "lost went from %llu to %llu",
			   (unsigned long long)lost1, (unsigned long long)lost2);
		ring_cons_finish(&c);
	}
	ring_cons_free(&c);
	free(mem);
	return 0;
}
