// SPDX-License-Identifier: MIT
/*
 * The agent's durable state: cursor file round trip and damage, spool
 * index and eviction, damaged spool files, the lazy cursor file (ACKed
 * files kept until it covers them, saved before an eviction needs it),
 * and the crash points of the durability protocol driven through a real
 * shm ring: batches spooled but the cursor file not saved for a while,
 * a batch write cut short, batches drained into memory and never spooled
 * while the producer overwrote the ring.  After every crash, resuming
 * from the saved state spools each record at most once, and every record
 * is either spooled or counted lost by the ring consumer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/batch.h"
#include "agent/spool.h"
#include "common/ring/ring.h"
#include "test.h"

static char dir[64], spooldir[96], curpath[96];

static void rm_rf(const char *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	if (system(cmd))
		printf("# rm failed\n");
}

static void fresh(void)
{
	rm_rf(dir);
	mkdir(dir, 0700);
}

static int count_files(const char *d)
{
	char cmd[256];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -1 '%s' | wc -l", d);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static void test_cursor_file(void)
{
	struct cursor_tab t = { 0 }, u = { 0 };
	struct cursor c = { .instance = 0xabcdef, .ring = 3, .pos = 100, .rec_no = 20 };
	char err[256];
	FILE *f;

	fresh();
	is_int(cursor_load(curpath, &t, err, sizeof(err)), 0, "missing cursor file: empty");
	is_int(t.n, 0, "empty table");
	cursor_tab_set(&t, &c);
	c.ring = 4;
	c.pos = 7;
	cursor_tab_set(&t, &c);
	c.pos = 5; /* backwards: ignored */
	c.rec_no = 1;
	cursor_tab_set(&t, &c);
	is_u64(cursor_tab_get(&t, 0xabcdef, 4)->pos, 7, "cursors never move backwards");
	t.seq = 42;
	is_int(cursor_save(curpath, &t, 1), 0, "save (with fsync)");
	is_int(cursor_load(curpath, &u, err, sizeof(err)), 0, "load");
	ok(u.n == 2 && u.seq == 42 && cursor_tab_get(&u, 0xabcdef, 3)->pos == 100 &&
	   cursor_tab_get(&u, 0xabcdef, 3)->rec_no == 20, "round trip");
	cursor_tab_forget(&u, 0xabcdef);
	is_int(u.n, 0, "forget an instance");

	f = fopen(curpath, "a");
	fprintf(f, "ring zz 1 2\n");
	fclose(f);
	is_int(cursor_load(curpath, &u, err, sizeof(err)), -EBADMSG, "damaged line rejected");
	ok(strstr(err, ":5:") && strstr(err, "ring zz 1 2"), "error names line 5: %s", err);
	is_int(u.n, 0, "table left empty on damage");
	f = fopen(curpath, "w");
	fprintf(f, "hello\n");
	fclose(f);
	is_int(cursor_load(curpath, &u, err, sizeof(err)), -EBADMSG, "not a cursor file");
	cursor_tab_free(&t);
	cursor_tab_free(&u);
}

/* A frame of n dummy spans (not decodable spans: the spool does not care)
 * with seq. */
static uint32_t mkframe(struct wire_batch *b, uint64_t seq, unsigned n, uint32_t size)
{
	uint8_t rec[4096] = { 0 };
	struct spanrec r = { 0 };

	wire_batch_reset(b);
	for (unsigned i = 0; i < n; i++)
		batch_add(b, rec, size, &r, NULL, NULL);
	return wire_batch_seal(b, seq);
}

static void test_spool_index(void)
{
	struct cursor_tab t = { 0 };
	struct spool sp;
	struct wire_batch b;
	struct cursor c = { .instance = 9, .ring = 0, .pos = 10, .rec_no = 5 };
	uint32_t fl;
	char path[160];
	int fd;

	fresh();
	wire_batch_init(&b, 1 << 16, 1000);
	is_int(spool_open(&sp, spooldir, curpath, 1 << 20, 0, &t), 0, "open (creates the directory)");
	for (uint64_t s = 1; s <= 5; s++) {
		fl = mkframe(&b, s, (unsigned)s, 100);
		c.pos = s * 10;
		is_int(spool_put(&sp, b.buf, fl, (uint32_t)s, &c, 1), 0, "put batch %llu",
		       (unsigned long long)s);
	}
	ok(sp.nbatches == 5 && sp.max_seq == 5, "5 batches indexed");
	ok(t.seq == 5 && cursor_tab_get(&t, 9, 0)->pos == 50 && sp.dirty,
	   "the table follows the trailers; the file is behind");
	is_int(count_files(spooldir), 5, "5 files");
	fl = mkframe(&b, 5, 1, 100);
	is_int(spool_put(&sp, b.buf, fl, 1, &c, 1), -EINVAL, "a seq not above the spool: refused");
	spool_ack(&sp, spool_find(&sp, 2));
	ok(spool_find(&sp, 2) && sp.nacked == 1 && spool_unacked(&sp) == 4,
	   "ACKed batch 2 kept: the cursor file does not cover it yet");
	is_int(count_files(spooldir), 5, "its file is still there");
	is_int(spool_save_cursors(&sp), 0, "save the cursor file");
	ok(!spool_find(&sp, 2) && !sp.nacked && sp.saved_seq == 5 && !sp.dirty,
	   "the save covers batch 2: dropped");
	is_int(count_files(spooldir), 4, "its file removed");
	spool_ack(&sp, spool_find(&sp, 3));
	ok(!spool_find(&sp, 3), "an ACK the cursor file covers drops at once");
	spool_close(&sp);

	/* Reopen: index rebuilt; cursor trailers applied above t.seq only. */
	cursor_tab_free(&t);
	t.seq = 3;
	is_int(spool_open(&sp, spooldir, curpath, 1 << 20, 0, &t), 0, "reopen");
	ok(sp.nbatches == 3 && spool_first(&sp)->seq == 1, "index rebuilt in seq order");
	is_int(spool_first(&sp)->nspans, 1, "span counts read back");
	ok(cursor_tab_get(&t, 9, 0) && cursor_tab_get(&t, 9, 0)->pos == 50,
	   "cursor from the newest trailer (batch 5)");
	spool_close(&sp);

	/* Damage: a flipped byte, a cut file, a stray tmp file. */
	snprintf(path, sizeof(path), "%s/%020d.batch", spooldir, 4);
	fd = open(path, O_RDWR);
	ok(fd >= 0 && pwrite(fd, "X", 1, 40) == 1, "flip a payload byte of batch 4");
	close(fd);
	snprintf(path, sizeof(path), "%s/%020d.batch", spooldir, 5);
	ok(!truncate(path, 30), "cut batch 5");
	snprintf(path, sizeof(path), "%s/tmp-6", spooldir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	cursor_tab_free(&t);
	t.seq = 0;
	is_int(spool_open(&sp, spooldir, curpath, 1 << 20, 0, &t), 0, "reopen with damage");
	ok(sp.nbatches == 1 && sp.corrupt_files == 2, "damaged batches dropped and counted");
	is_int(count_files(spooldir), 1, "damaged and tmp files removed");
	spool_close(&sp);

	/* A renumbering cut short by a crash (earlier agents gave a NACKed
	 * batch a new seq: rename first, then the header). */
	{
		char from[160], to[160];
		struct wire_hdr h;

		snprintf(from, sizeof(from), "%s/%020d.batch", spooldir, 1);
		snprintf(to, sizeof(to), "%s/%020d.batch", spooldir, 11);
		ok(!rename(from, to), "crash mid-renumber: file renamed, frame still seq 1");
		cursor_tab_free(&t);
		t.seq = 0;
		is_int(spool_open(&sp, spooldir, curpath, 1 << 20, 0, &t), 0, "reopen");
		ok(sp.nbatches == 1 && !sp.corrupt_files && spool_find(&sp, 11),
		   "the batch kept under its new seq");
		fd = open(to, O_RDONLY);
		ok(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.seq == 11,
		   "the interrupted renumbering was finished (frame seq %llu)",
		   (unsigned long long)h.seq);
		close(fd);
	}
	spool_close(&sp);

	/* Eviction: oldest first, spans counted, the bound kept, the cursor
	 * file saved before a file newer than it goes. */
	fresh();
	cursor_tab_free(&t);
	t.seq = 0;
	fl = mkframe(&b, 1, 10, 1000);
	uint64_t fsize = fl + 12 + sizeof(struct cursor);

	is_int(spool_open(&sp, spooldir, curpath, fsize * 3, 0, &t), 0, "spool of 3 batches");
	for (uint64_t s = 1; s <= 5; s++) {
		fl = mkframe(&b, s, 10, 1000);
		c.pos = 100 + s;
		spool_put(&sp, b.buf, fl, 10, &c, 1);
	}
	ok(sp.nbatches == 3 && spool_first(&sp)->seq == 3, "two oldest evicted");
	ok(sp.evicted_batches == 2 && sp.evicted_spans == 20, "evictions counted (%llu spans)",
	   (unsigned long long)sp.evicted_spans);
	ok(sp.bytes <= sp.max_bytes, "bound kept (%llu <= %llu)", (unsigned long long)sp.bytes,
	   (unsigned long long)sp.max_bytes);
	ok(sp.saves == 1 && sp.saved_seq == 3, "the cursor file was saved before evicting "
	   "(%llu saves, covers %llu)", (unsigned long long)sp.saves,
	   (unsigned long long)sp.saved_seq);
	{
		struct cursor_tab u = { 0 };
		char err[200];

		cursor_load(curpath, &u, err, sizeof(err));
		ok(u.seq == 3 && cursor_tab_get(&u, 9, 0) && cursor_tab_get(&u, 9, 0)->pos == 103,
		   "the saved file holds the cursor of the newest batch then spooled");
		cursor_tab_free(&u);
	}
	spool_ack(&sp, spool_find(&sp, 3));
	spool_ack(&sp, spool_find(&sp, 4));
	ok(!spool_find(&sp, 3) && spool_find(&sp, 4), "ACK 3 (covered): gone; ACK 4: kept");
	for (uint64_t s = 6; s <= 7; s++) {
		fl = mkframe(&b, s, 10, 1000);
		spool_put(&sp, b.buf, fl, 10, &c, 1);
	}
	ok(!spool_find(&sp, 4) && sp.evicted_batches == 2 && sp.saves == 2 &&
	   sp.nbatches == 3, "an ACKed batch makes room after a save, not counted as evicted");
	spool_close(&sp);
	wire_batch_free(&b);
	cursor_tab_free(&t);
}

/* ---- crash points, with a real ring -------------------------------------- */

#define SLOTS 256u
#define NREC  3000u
#define INST  0x1111222233334444ull
#define QMAX  3

static uint8_t *ring_mem;
static struct ring_prod prod;
static uint64_t produced;

static void produce(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t rec[128];
		struct spanrec_fixed f = { .trace_lo = 1, .span_id = ++produced };
		size_t off = 0;

		spanrec_put_item(rec + 64, sizeof(rec) - 64, &off, SPAN_ITEM_NAME, 0, "x", 1, NULL, 0);
		f.items_len = (uint32_t)off;
		f.nitems = 1;
		memcpy(rec, &f, 64);
		struct ring_piece pc = { rec, (uint32_t)(64 + off) };

		ring_write(&prod, FAY_REC_SPAN, &pc, 1);
	}
}

/* The agent in miniature: a ring consumer (the drain thread), sealed
 * batches waiting in memory (the queue), the spool and its lazy cursor
 * file (the main thread), a collector ACKing a prefix. */
struct sim {
	struct ring_cons c;
	struct wire_batch b;
	struct wire_batch q[QMAX];           /* sealed, not yet spooled */
	struct cursor qcur[QMAX];
	unsigned nq;
	struct spool sp;
	struct cursor_tab t;
	uint64_t next_seq;
};

static uint8_t seen[NREC + 1];
static uint64_t lost_counted, dups;

static int sim_rec(void *ctx, uint16_t type, const void *p, uint32_t len, uint64_t rec_no)
{
	struct sim *s = ctx;
	struct spanrec r;
	char err[100];

	if (spanrec_decode(p, len, &r, err, sizeof(err)) < 0)
		return 0;
	return batch_add(&s->b, p, len, &r, NULL, NULL);
}

static int count_span(void *ctx, const void *rec, uint32_t len)
{
	struct spanrec_fixed f;

	(void)ctx;
	memcpy(&f, rec, sizeof(f));
	if (f.span_id <= NREC && seen[f.span_id]++)
		dups++;
	return 0;
}

static void sim_start(struct sim *s)
{
	char err[200];
	const struct cursor *c;

	memset(s, 0, sizeof(*s));
	wire_batch_init(&s->b, 4096, 1000);
	for (unsigned i = 0; i < QMAX; i++)
		wire_batch_init(&s->q[i], 4096, 1000);
	cursor_load(curpath, &s->t, err, sizeof(err));
	spool_open(&s->sp, spooldir, curpath, 1 << 30, 0, &s->t);
	s->next_seq = s->t.seq + 1;
	c = cursor_tab_get(&s->t, INST, 0);
	ring_cons_init(&s->c, ring_mem, SLOTS, c ? c->pos : 0, c ? c->rec_no : 0);
}

/* A crash: whatever is in memory is gone. */
static void sim_crash(struct sim *s)
{
	lost_counted += s->c.lost;
	ring_cons_free(&s->c);
	wire_batch_free(&s->b);
	for (unsigned i = 0; i < QMAX; i++)
		wire_batch_free(&s->q[i]);
	spool_close(&s->sp);
	cursor_tab_free(&s->t);
}

/* The drain thread seals the batch being filled into the queue.
 * Returns 0, or -ENOBUFS when the queue is full. */
static int sim_seal(struct sim *s)
{
	struct wire_batch tmp;

	if (!s->b.count)
		return 0;
	if (s->nq == QMAX)
		return -ENOBUFS;
	tmp = s->q[s->nq];
	s->q[s->nq] = s->b;
	s->qcur[s->nq] = (struct cursor){ .instance = INST, .ring = 0, .pos = s->c.pos,
					  .rec_no = s->c.rec_no };
	s->nq++;
	s->b = tmp;
	wire_batch_reset(&s->b);
	return 0;
}

/* Drain up to max records into batches; stops when the queue is full. */
static void sim_drain(struct sim *s, unsigned max)
{
	while (max) {
		int n = ring_drain(&s->c, sim_rec, s, max);

		if (n == -ENOSPC) {
			if (sim_seal(s))
				return;
			continue;
		}
		if (n <= 0)
			break;
		max -= (unsigned)n;
	}
	sim_seal(s);
}

/* The main thread spools up to n queued batches, in order. */
static void sim_spool(struct sim *s, unsigned n)
{
	while (n-- && s->nq) {
		uint32_t fl = wire_batch_seal(&s->q[0], s->next_seq);
		struct wire_batch tmp = s->q[0];

		if (spool_put(&s->sp, s->q[0].buf, fl, s->q[0].count, &s->qcur[0], 1))
			return;
		wire_batch_walk(s->q[0].buf + FAY_WIRE_HDR_SIZE, fl - FAY_WIRE_HDR_SIZE, count_span,
			   NULL, NULL, 0);
		s->next_seq++;
		memmove(&s->q[0], &s->q[1], (QMAX - 1) * sizeof(s->q[0]));
		memmove(&s->qcur[0], &s->qcur[1], (QMAX - 1) * sizeof(s->qcur[0]));
		s->q[QMAX - 1] = tmp;
		s->nq--;
	}
}

/* The collector ACKs the n oldest unacknowledged batches. */
static void sim_ack(struct sim *s, unsigned n)
{
	for (struct spool_ent *e = spool_first(&s->sp), *nx; e && n; e = nx) {
		nx = spool_next(&s->sp, e);
		if (e->acked)
			continue;
		spool_ack(&s->sp, e);
		n--;
	}
}

static void test_crash_points(void)
{
	struct sim s;
	uint64_t missing = 0, spooled_files_max = 0;
	unsigned state = 12345;

	fresh();
	ring_mem = calloc(1, FAY_RING_CTL_SIZE + SLOTS * FAY_SLOT_SIZE);
	ring_prod_init(&prod, ring_mem, SLOTS);

	/* Rounds of: produce (sometimes more than the ring holds), restart
	 * from the files alone, drain, spool some of it, ACK some, save the
	 * cursor file now and then, and crash with batches still in memory. */
	for (unsigned round = 0; produced < NREC; round++) {
		unsigned r;

		state = state * 1103515245u + 12345u;
		r = state >> 16;
		produce(NREC - produced < 40 + r % 100 ? (unsigned)(NREC - produced) : 40 + r % 100);
		sim_start(&s);
		sim_drain(&s, 20 + r % 200);
		sim_spool(&s, r % 3);
		sim_ack(&s, (r >> 4) % 3);
		if (r & 0x100)
			spool_save_cursors(&s.sp);
		if (r & 0x200)
			sim_drain(&s, 50);    /* more in memory, never spooled */
		if (s.sp.nbatches > spooled_files_max)
			spooled_files_max = s.sp.nbatches;
		sim_crash(&s);
	}
	/* A clean run spools the rest. */
	sim_start(&s);
	while (s.c.pos != s.c.ctl->head || s.nq || s.b.count) {
		sim_drain(&s, 1u << 30);
		sim_spool(&s, QMAX);
	}
	for (unsigned i = 1; i <= NREC; i++)
		missing += !seen[i];
	is_u64(dups, 0, "no record spooled twice across crashes");
	ok(missing > 0, "the producer overwrote records held only in memory (%llu)",
	   (unsigned long long)missing);
	ok(missing <= lost_counted + s.c.lost, "every record not spooled was counted lost "
	   "(%llu missing, %llu counted by the consumers)", (unsigned long long)missing,
	   (unsigned long long)(lost_counted + s.c.lost));
	ok(spooled_files_max > 3, "batches kept across restarts (up to %llu files)",
	   (unsigned long long)spooled_files_max);
	sim_crash(&s);
	free(ring_mem);
}

/*
 * The exact case: records drained into memory, the agent killed before
 * they reach the spool, the producer overwriting them meanwhile.  The
 * restarted consumer resumes from the spooled cursor and counts exactly
 * the overwritten records lost; it delivers each surviving one once.
 */
static void test_memory_overwritten(void)
{
	struct sim s;
	uint64_t first_new;

	fresh();
	memset(seen, 0, sizeof(seen));
	dups = 0;
	produced = 0;
	ring_mem = calloc(1, FAY_RING_CTL_SIZE + SLOTS * FAY_SLOT_SIZE);
	ring_prod_init(&prod, ring_mem, SLOTS);

	produce(50);
	sim_start(&s);
	sim_drain(&s, 1u << 30);
	sim_spool(&s, 1);             /* 50 records spooled */
	produce(60);
	sim_drain(&s, 1u << 30);      /* 60 in memory */
	ok(s.nq >= 1, "sealed batches wait in memory");
	sim_crash(&s);
	produce(400);                 /* the ring holds ~128: the 60 are overwritten */
	first_new = produced;
	sim_start(&s);
	is_u64(s.c.rec_no, 50, "restart: the ring resumes where the spool ends (record 50)");
	sim_drain(&s, 1u << 30);
	sim_spool(&s, QMAX);
	ok(s.c.delivered + s.c.lost == 460, "restarted consumer: %llu delivered + %llu lost == "
	   "the 460 records after the spooled ones", (unsigned long long)s.c.delivered,
	   (unsigned long long)s.c.lost);
	ok(s.c.lost >= 60, "the 60 overwritten records are among those counted lost");
	{
		uint64_t got = 0;

		for (unsigned i = 1; i <= first_new; i++)
			got += seen[i];
		is_u64(got, 50 + s.c.delivered, "spooled: the first 50 and every survivor");
	}
	is_u64(dups, 0, "nothing spooled twice");
	sim_crash(&s);
	free(ring_mem);
}

/* A link planted where the batch's temporary file was once named
 * (tmp-SEQ, predictable) is neither followed nor truncated: the file it
 * points to keeps its bytes, and the batch is written all the same. */
static void test_tmp_planted(void)
{
	struct cursor_tab t = { 0 };
	struct spool sp;
	struct wire_batch b;
	struct cursor c = { .instance = 9, .ring = 0, .pos = 10, .rec_no = 5 };
	char victim[160], link[160], buf[16] = "";
	uint32_t fl;
	int fd;

	fresh();
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && write(fd, "precious", 8) == 8, "a file the agent may write");
	if (fd >= 0)
		close(fd);
	wire_batch_init(&b, 1 << 16, 1000);
	is_int(spool_open(&sp, spooldir, curpath, 1 << 20, 0, &t), 0, "open");
	for (unsigned s = 1; s <= 3; s++) {
		snprintf(link, sizeof(link), "%s/tmp-%u", spooldir, s);
		ok(symlink(victim, link) == 0, "a link planted at tmp-%u", s);
	}
	for (uint64_t s = 1; s <= 3; s++) {
		fl = mkframe(&b, s, 2, 100);
		is_int(spool_put(&sp, b.buf, fl, 2, &c, 1), 0, "put batch %llu",
		       (unsigned long long)s);
	}
	ok(sp.nbatches == 3, "3 batches spooled");
	fd = open(victim, O_RDONLY);
	ok(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 8 && !strcmp(buf, "precious"),
	   "the linked file untouched: '%s'", buf);
	if (fd >= 0)
		close(fd);
	is_int(count_files(spooldir), 6, "3 batch files beside the 3 links, no temporary file left");
	spool_close(&sp);
	cursor_tab_free(&t);
	wire_batch_free(&b);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/fay-test-spool-%d", (int)getpid());
	snprintf(spooldir, sizeof(spooldir), "%s/spool", dir);
	snprintf(curpath, sizeof(curpath), "%s/cursors", dir);
	test_cursor_file();
	test_spool_index();
	test_crash_points();
	test_memory_overwritten();
	test_tmp_planted();
	rm_rf(dir);
	return test_done();
}
