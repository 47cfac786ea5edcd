// SPDX-License-Identifier: MIT
/*
 * The agent's durable state: cursor file round trip and damage, spool
 * index and eviction, damaged spool files, and the crash points of the
 * durability protocol (batch spooled, cursors not yet saved; a batch write
 * cut short) driven through a real shm ring: after every crash, resuming
 * from the saved state spools each record exactly once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
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
static uint32_t mkframe(struct batch *b, uint64_t seq, unsigned n, uint32_t size)
{
	uint8_t rec[4096] = { 0 };
	struct spanrec r = { 0 };

	batch_reset(b);
	for (unsigned i = 0; i < n; i++)
		batch_add(b, rec, size, &r, NULL);
	return batch_seal(b, seq);
}

static void test_spool_index(void)
{
	struct cursor_tab t = { 0 };
	struct spool sp;
	struct batch b;
	struct cursor c = { .instance = 9, .ring = 0, .pos = 10, .rec_no = 5 };
	uint32_t fl;
	char path[160];
	int fd;

	fresh();
	batch_init(&b, 1 << 16, 1000);
	is_int(spool_open(&sp, spooldir, 1 << 20, 0, &t), 0, "open (creates the directory)");
	for (uint64_t s = 1; s <= 5; s++) {
		fl = mkframe(&b, s, (unsigned)s, 100);
		c.pos = s * 10;
		is_int(spool_put(&sp, b.buf, fl, (uint32_t)s, &c, 1), 0, "put batch %llu",
		       (unsigned long long)s);
	}
	ok(sp.nbatches == 5 && sp.max_seq == 5, "5 batches indexed");
	is_int(count_files(spooldir), 5, "5 files");
	spool_drop(&sp, spool_find(&sp, 2));
	is_int(count_files(spooldir), 4, "drop removes the file");
	spool_close(&sp);

	/* Reopen: index rebuilt; cursor trailers applied above t.seq only. */
	t.seq = 3;
	is_int(spool_open(&sp, spooldir, 1 << 20, 0, &t), 0, "reopen");
	ok(sp.nbatches == 4 && spool_first(&sp)->seq == 1, "index rebuilt in seq order");
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
	is_int(spool_open(&sp, spooldir, 1 << 20, 0, &t), 0, "reopen with damage");
	ok(sp.nbatches == 2 && sp.corrupt_files == 2, "damaged batches dropped and counted");
	is_int(count_files(spooldir), 2, "damaged and tmp files removed");

	/* Renumbering (after a NACK), and one cut short by a crash. */
	is_int(spool_renumber(&sp, spool_find(&sp, 1), 3), -EINVAL,
	       "renumber only upwards past every seq");
	is_int(spool_renumber(&sp, spool_find(&sp, 1), 10), 0, "renumber 1 -> 10");
	ok(!spool_find(&sp, 1) && spool_find(&sp, 10) && spool_first(&sp)->seq == 3,
	   "moved to the end of the list");
	spool_close(&sp);
	{
		char from[160], to[160];
		struct wire_hdr h;

		snprintf(from, sizeof(from), "%s/%020d.batch", spooldir, 3);
		snprintf(to, sizeof(to), "%s/%020d.batch", spooldir, 11);
		ok(!rename(from, to), "crash mid-renumber: file renamed, frame still seq 3");
		is_int(spool_open(&sp, spooldir, 1 << 20, 0, &t), 0, "reopen");
		ok(sp.nbatches == 2 && !sp.corrupt_files && spool_find(&sp, 10) &&
		   spool_find(&sp, 11), "both batches kept under their new seqs");
		fd = open(to, O_RDONLY);
		ok(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.seq == 11,
		   "the interrupted renumbering was finished (frame seq %llu)",
		   (unsigned long long)h.seq);
		close(fd);
		snprintf(to, sizeof(to), "%s/%020d.batch", spooldir, 10);
		fd = open(to, O_RDONLY);
		ok(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.seq == 10,
		   "renumbered frame says seq 10");
		close(fd);
	}
	spool_close(&sp);

	/* Eviction: oldest first, spans counted, the bound kept. */
	fresh();
	fl = mkframe(&b, 1, 10, 1000);
	uint64_t fsize = fl + 12 + sizeof(struct cursor);

	is_int(spool_open(&sp, spooldir, fsize * 3, 0, &t), 0, "spool of 3 batches");
	for (uint64_t s = 1; s <= 5; s++) {
		fl = mkframe(&b, s, 10, 1000);
		spool_put(&sp, b.buf, fl, 10, &c, 1);
	}
	ok(sp.nbatches == 3 && spool_first(&sp)->seq == 3, "two oldest evicted");
	ok(sp.evicted_batches == 2 && sp.evicted_spans == 20, "evictions counted (%llu spans)",
	   (unsigned long long)sp.evicted_spans);
	ok(sp.bytes <= sp.max_bytes, "bound kept (%llu <= %llu)", (unsigned long long)sp.bytes,
	   (unsigned long long)sp.max_bytes);
	spool_close(&sp);
	batch_free(&b);
	cursor_tab_free(&t);
}

/* ---- crash points, with a real ring -------------------------------------- */

#define SLOTS 256u
#define NREC  2000u
#define INST  0x1111222233334444ull

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

struct sim {
	struct ring_cons c;
	struct batch b;
	struct spool sp;
	struct cursor_tab t;
	uint64_t next_seq;
};

static int sim_rec(void *ctx, uint16_t type, const void *p, uint32_t len, uint64_t rec_no)
{
	struct sim *s = ctx;
	struct spanrec r;
	char err[100];

	if (spanrec_decode(p, len, &r, err, sizeof(err)) < 0)
		return 0;
	return batch_add(&s->b, p, len, &r, NULL);
}

static void sim_start(struct sim *s)
{
	char err[200];
	const struct cursor *c;

	memset(s, 0, sizeof(*s));
	batch_init(&s->b, 4096, 1000);
	cursor_load(curpath, &s->t, err, sizeof(err));
	spool_open(&s->sp, spooldir, 1 << 30, 0, &s->t);
	s->next_seq = (s->t.seq > s->sp.max_seq ? s->t.seq : s->sp.max_seq) + 1;
	c = cursor_tab_get(&s->t, INST, 0);
	ring_cons_init(&s->c, ring_mem, SLOTS, c ? c->pos : 0, c ? c->rec_no : 0);
}

static void sim_stop(struct sim *s)
{
	ring_cons_free(&s->c);
	batch_free(&s->b);
	spool_close(&s->sp);
	cursor_tab_free(&s->t);
}

/* The agent's flush: spool the batch, then save cursors (unless crashing
 * between the two). */
static void sim_flush(struct sim *s, int crash_before_cursors)
{
	struct cursor cur = { .instance = INST, .ring = 0, .pos = s->c.pos,
			      .rec_no = s->c.rec_no };
	uint32_t fl;

	if (!s->b.count)
		return;
	fl = batch_seal(&s->b, s->next_seq);
	if (spool_put(&s->sp, s->b.buf, fl, s->b.count, &cur, 1))
		return;
	s->t.seq = s->next_seq++;
	cursor_tab_set(&s->t, &cur);
	batch_reset(&s->b);
	if (!crash_before_cursors)
		cursor_save(curpath, &s->t, 0);
}

/* Drain up to max records, flushing when the batch is full. */
static void sim_drain(struct sim *s, unsigned max, int crash_last)
{
	while (max) {
		int n = ring_drain(&s->c, sim_rec, s, max);

		if (n == -ENOSPC) {
			sim_flush(s, 0);
			continue;
		}
		if (n <= 0)
			break;
		max -= (unsigned)n;
	}
	sim_flush(s, crash_last);
}

static uint8_t seen[NREC + 1];

static int count_span(void *ctx, const void *rec, uint32_t len)
{
	struct spanrec_fixed f;
	int *dups = ctx;

	memcpy(&f, rec, sizeof(f));
	if (f.span_id <= NREC && seen[f.span_id]++)
		(*dups)++;
	return 0;
}

static void test_crash_points(void)
{
	struct sim s;
	int dups = 0, missing = 0;

	fresh();
	ring_mem = calloc(1, FAY_RING_CTL_SIZE + SLOTS * FAY_SLOT_SIZE);
	ring_prod_init(&prod, ring_mem, SLOTS);

	/* Rounds of: produce a little, drain a little, crash at a chosen
	 * point, restart from the files alone. */
	for (unsigned round = 0; produced < NREC; round++) {
		produce(NREC - produced < 40 ? (unsigned)(NREC - produced) : 40);
		sim_start(&s);
		switch (round % 4) {
		case 0: /* batch spooled, cursors not saved */
			sim_drain(&s, 60, 1);
			break;
		case 1: /* clean */
			sim_drain(&s, 1u << 30, 0);
			break;
		case 2: { /* a batch write cut short: tmp file only */
			char p[160];
			int fd;

			sim_drain(&s, 30, 0);
			snprintf(p, sizeof(p), "%s/tmp-%llu", spooldir,
				 (unsigned long long)s.next_seq);
			fd = open(p, O_WRONLY | O_CREAT, 0600);
			if (write(fd, "partial", 7) != 7)
				printf("# write failed\n");
			close(fd);
			break;
		}
		case 3: /* crash while records sit in the unflushed batch */
			ring_drain(&s.c, sim_rec, &s, 5);
			break;
		}
		sim_stop(&s);
	}
	/* Final clean run drains the rest. */
	sim_start(&s);
	sim_drain(&s, 1u << 30, 0);
	for (struct spool_ent *e = spool_first(&s.sp); e; e = spool_next(&s.sp, e)) {
		int fd = spool_open_ent(&s.sp, e);
		uint8_t *buf = malloc(e->frame_len);
		char err[200];

		if (pread(fd, buf, e->frame_len, 0) == (ssize_t)e->frame_len)
			batch_walk(buf + FAY_WIRE_HDR_SIZE, e->frame_len - FAY_WIRE_HDR_SIZE,
				   count_span, &dups, err, sizeof(err));
		free(buf);
		close(fd);
	}
	for (unsigned i = 1; i <= NREC; i++)
		missing += !seen[i];
	is_u64(s.c.lost, 0, "the ring never lapped the consumer");
	is_int(dups, 0, "no record spooled twice across crashes");
	is_int(missing, 0, "no record lost across crashes");
	ok(s.sp.nbatches > 25, "many batches over %llu restarts (%llu)",
	   (unsigned long long)(NREC / 40), (unsigned long long)s.sp.nbatches);
	/* seqs strictly increase across restarts */
	uint64_t prev = 0;
	int mono = 1;

	for (struct spool_ent *e = spool_first(&s.sp); e; e = spool_next(&s.sp, e)) {
		mono &= e->seq > prev;
		prev = e->seq;
	}
	ok(mono && prev == s.next_seq - 1, "batch seqs strictly increase across restarts");
	sim_stop(&s);
	free(ring_mem);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/fay-test-spool-%d", (int)getpid());
	snprintf(spooldir, sizeof(spooldir), "%s/spool", dir);
	snprintf(curpath, sizeof(curpath), "%s/cursors", dir);
	test_cursor_file();
	test_spool_index();
	test_crash_points();
	rm_rf(dir);
	return test_done();
}
