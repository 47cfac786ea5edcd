/* SPDX-License-Identifier: MIT */
/*
 * fay shared-memory span rings: the on-file layout (a versioned ABI).
 *
 * An instrumented process (libfay) creates one file
 *     $FAY_SHM_DIR/fay-<pid>-<instance hex>.shm      (mode 0600)
 * and maps it.  The agent (`fay agent`) maps the same file and drains it.
 * Everything in the file is addressed by offset from the start of the file,
 * never by pointer, because each process maps it at a different address.
 * All integers are little-endian (the host's; x86-64/aarch64).
 *
 *   offset 0                 struct fay_shm_hdr         (FAY_SHM_HDR_SIZE)
 *   pool_off                 npool x pool_stride        span handles
 *   cur_off                  ncur x struct fay_cur_cell the threads' current spans
 *   rings_off + i*ring_stride  struct fay_ring_ctl      (FAY_RING_CTL_SIZE)
 *                            + ring_slots x struct fay_slot
 *
 * Rings are single-producer (one thread owns a ring at a time) overwrite
 * rings ("flight recorder"): the producer never waits for, and never reads
 * anything written by, the consumer.  A record occupies one or more
 * consecutive 64-byte slots; every slot carries a sequence word so the
 * consumer can tell a committed slot from one being rewritten (seqlock):
 *
 *   seq = (pos << 2) | FAY_SEQ_FIRST? | FAY_SEQ_BUSY?
 *
 * where pos is the slot's absolute position (the ring index is pos &
 * (ring_slots - 1)).  The producer, for each slot of a record:
 *   store seq = pos<<2 | BUSY (relaxed); release fence;
 *   write data; store-release seq = pos<<2 [| FIRST on the first slot]
 * and after the last slot store-release ctl->records += 1 then
 * ctl->head = next pos.  The first slot's data starts with
 * struct fay_rec_hdr, whose rec_no numbers records 0, 1, 2 ... per ring.
 *
 * The consumer keeps its own position (it is never written to the file):
 * records it copies with valid sequence words (checked before and after
 * the copy) are delivered; records it finds overwritten are counted lost
 * from the rec_no gap, so  delivered + lost == ctl->records  exactly.
 * See src/common/ring/README.md for the argument, docs/ABI.md for the
 * record payloads.
 */
#ifndef FAY_RING_H
#define FAY_RING_H

#include <stdint.h>

#define FAY_SHM_MAGIC     UINT64_C(0x314d48535f594146) /* "FAY_SHM1" */
#define FAY_SHM_VERSION   2u   /* 2: span timestamps may be TSC ticks, the
				* header's TSC line (docs/ABI.md 1.2.2) */
#define FAY_SHM_VERSION_MIN 1u /* the oldest version an agent still reads */
#define FAY_SHM_HDR_SIZE  4096u
#define FAY_SHM_PREFIX    "fay-"
#define FAY_SHM_SUFFIX    ".shm"

#define FAY_SLOT_SIZE     64u
#define FAY_SLOT_DATA     56u   /* FAY_SLOT_SIZE - sizeof(seq) */
#define FAY_RING_CTL_SIZE 128u

#define FAY_SEQ_BUSY      UINT64_C(1)
#define FAY_SEQ_FIRST     UINT64_C(2)
#define FAY_SEQ_POS(seq)  ((seq) >> 2)

/* Process states (fay_shm_hdr.state). */
enum fay_shm_state {
	FAY_SHM_INIT   = 0, /* being set up: consumers must wait */
	FAY_SHM_LIVE   = 1,
	FAY_SHM_CLOSED = 2, /* fay_shutdown() ran: nothing more will be written */
};

/* Record types (fay_rec_hdr.type). */
enum fay_rec_type {
	FAY_REC_SPAN = 1,   /* payload: a span, see src/common/spanrec.h */
};

struct fay_shm_hdr {
	uint64_t magic;          /* FAY_SHM_MAGIC */
	uint32_t version;        /* FAY_SHM_VERSION */
	uint32_t hdr_size;       /* FAY_SHM_HDR_SIZE */
	uint64_t file_size;      /* the whole file; the consumer checks it */
	uint64_t instance;       /* random, identifies this file across agent restarts */
	uint32_t pid;
	uint32_t state;          /* enum fay_shm_state, store-release */
	uint64_t start_ns;       /* CLOCK_REALTIME when created */

	/* rings */
	uint64_t rings_off;
	uint64_t ring_stride;    /* FAY_RING_CTL_SIZE + ring_slots * FAY_SLOT_SIZE */
	uint32_t nrings;
	uint32_t ring_slots;     /* power of two */

	/* span handle pool (struct fay_pool_slot, see spanrec.h) */
	uint64_t pool_off;
	uint32_t npool;
	uint32_t pool_stride;

	/* the process's default local endpoint (fay_init) */
	char service[64];        /* NUL-terminated */
	char ip[48];             /* textual IPv4/IPv6, NUL-terminated, may be empty */
	uint16_t port;
	uint16_t _pad0;
	uint32_t sample_one_in;  /* informational: the current 1/N */

	/* Counters: written by the producer with atomic adds, read by the
	 * agent; each loss anywhere in the process is counted here or in a
	 * ring (ring losses are computed by the consumer). */
	uint64_t lost_no_handle; /* span not started: handle pool exhausted */
	uint64_t lost_no_ring;   /* span not recorded: every ring owned */
	uint64_t lost_too_big;   /* record larger than a ring can hold */
	uint64_t truncated;      /* spans whose annotations did not all fit */
	uint64_t spans_started;  /* sampled spans begun */
	uint64_t spans_unsampled;/* roots not sampled (added in per-thread batches) */
	uint64_t bad_traceparent;/* fay_span_remote() given a missing/malformed header */
	uint64_t lost_nested;    /* span calls dropped by the recursion guard
				  * (a signal handler interrupting a span call) */
	uint64_t lost_no_room;   /* span not recorded: no room on the file
				  * system to reserve a ring's pages */

	/* The threads' current spans (struct fay_cur_cell), for samplers
	 * outside the process (fay's profile(...) BPF program).  Added
	 * within version 1: 0 in files of older libfays (no table). */
	uint64_t cur_off;
	uint32_t ncur;           /* cells: a power of two, or 0 */
	uint32_t cur_stride;     /* FAY_CUR_CELL_SIZE */
	/* Version 2: the TSC line that converts the ticks of records with
	 * SPAN_F_TICKS to CLOCK_REALTIME ns (docs/ABI.md 1.2.2):
	 * ns = clk_ns0 + (int64)(tick - clk_tsc0) * clk_mult >> 32.
	 * clk_seq is odd while a thread rewrites the three (a sequence
	 * lock: one writer at a time, taken with a CAS). */
	uint32_t clk_seq;
	uint32_t _pad1;
	uint64_t clk_tsc0;
	uint64_t clk_ns0;
	uint64_t clk_mult;       /* ns per tick << 32; 0: no line yet */
};

/*
 * A thread's current span, in cell (tid & (ncur - 1)).  A thread takes a
 * cell by compare-and-swap of tid from 0 to its own thread id (as the
 * kernel sees it in the process's pid namespace) at its first recorded
 * span and gives it back (0) when it exits; a thread whose cell another
 * live thread holds has none.  Only the owner writes the rest, with plain
 * stores, span_id before slot_off: slot_off is the file offset of the
 * pool handle (struct fay_pool_slot) of the thread's innermost open
 * recorded span, 0 when it has none.  A reader that interrupted the
 * thread (a sampler on its CPU) trusts the handle only when the handle is
 * OPEN and its fixed.span_id equals span_id: a torn pair, a span ended
 * elsewhere or a handle reused never pass that test.
 */
#define FAY_CUR_CELL_SIZE 64u   /* a cache line: threads never share one */

struct fay_cur_cell {
	uint32_t tid;            /* owner, 0 = free; CAS */
	uint32_t _pad0;
	uint64_t span_id;        /* of the current span */
	uint64_t slot_off;       /* its handle's file offset, 0 = none */
	uint64_t _pad1[5];
};

struct fay_ring_ctl {
	uint64_t head;           /* next slot position; store-release after a record */
	uint64_t records;        /* records committed; store-release before head */
	uint32_t owner_tid;      /* 0 = free; claimed with CAS by a thread */
	uint32_t _pad0;
	uint64_t _pad[13];       /* to FAY_RING_CTL_SIZE */
};

struct fay_slot {
	uint64_t seq;
	uint8_t data[FAY_SLOT_DATA];
};

struct fay_rec_hdr {         /* at the start of a record's first slot */
	uint64_t rec_no;         /* 0, 1, 2 ... per ring */
	uint32_t len;            /* payload bytes after this header */
	uint16_t type;           /* enum fay_rec_type */
	uint16_t nslots;         /* slots the record occupies, >= 1 */
};

_Static_assert(sizeof(struct fay_shm_hdr) <= FAY_SHM_HDR_SIZE, "shm header");
_Static_assert(sizeof(struct fay_ring_ctl) == FAY_RING_CTL_SIZE, "ring ctl");
_Static_assert(sizeof(struct fay_slot) == FAY_SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fay_rec_hdr) == 16, "record header");
_Static_assert(sizeof(struct fay_cur_cell) == FAY_CUR_CELL_SIZE, "current span cell");

#endif
