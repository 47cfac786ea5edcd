// SPDX-License-Identifier: MIT
/*
 * Unwind tables from .eh_frame (src/probe/unwind.c) against binutils'
 * own reading of the same call frame information: every row `readelf
 * --debug-dump=frames-interp` prints for libc, liblzma and stack_work
 * built with -fomit-frame-pointer (its CFA rule, the return address at
 * CFA - 8 or undefined, where rbp is saved; a signal frame's saved
 * registers) must be what the table says
 * at that address and at the last byte before the next row.  Then a
 * process's table in its memfd (sealed, checked, this test's own
 * functions found), and the check (common/unwind_table.c) refusing
 * blobs with one field broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "probe/unwind.h"

/* A blob of one module holding rows, at its file addresses (bias 0) */
static void *blob_of(const struct unw_row *rows, size_t n, size_t *len)
{
	struct unw_hdr h = { UNW_MAGIC, UNW_VERSION, 1, (uint32_t)n, 0 };
	struct unw_mod m = { 1, (uint64_t)UINT32_MAX + 1, 0, 0, (uint32_t)n };
	unsigned char *b;

	*len = sizeof(h) + sizeof(m) + n * sizeof(*rows);
	h.size = *len;
	b = aligned_alloc(8, (*len + 7) / 8 * 8);
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), &m, sizeof(m));
	memcpy(b + sizeof(h) + sizeof(m), rows, n * sizeof(*rows));
	return b;
}

struct want {
	int kind, rbp;
	long cfa_off, rbp_off;
};

/* readelf's row: CFA, ra and rbp columns (rbp NULL: no column) */
static struct want want_of(const char *cfa, const char *ra, const char *rbp, bool signal)
{
	struct want w = { UNW_FP, UNW_RBP_SAME, 0, 0 };
	char *end;

	if (signal) {	/* x86-64 Linux's signal frame: rsp saved at 160, rbp at 120 */
		if (!strcmp(cfa, "exp")) {
			w.kind = UNW_SIGNAL;
			w.cfa_off = 160;
			w.rbp = UNW_RBP_AT;
			w.rbp_off = 120;
		}
		return w;
	}
	if (!strcmp(ra, "u")) {
		w.kind = UNW_END;
		return w;
	}
	if (strcmp(ra, "c-8"))
		return w;
	if (!strncmp(cfa, "rsp+", 4) || !strncmp(cfa, "rbp+", 4)) {
		w.cfa_off = strtol(cfa + 4, &end, 10);
		if (*end)
			return w;
		w.kind = cfa[1] == 's' ? UNW_RSP : UNW_RBP;
	} else {
		return w;
	}
	if (rbp && rbp[0] == 'c' && (rbp[1] == '-' || rbp[1] == '+')) {
		w.rbp = UNW_RBP_AT;
		w.rbp_off = strtol(rbp + 1, NULL, 10);
	} else if (rbp && strcmp(rbp, "u") && strcmp(rbp, "s")) {
		w.rbp = UNW_RBP_LOST;
	}
	return w;
}

static bool same(const struct unw_row *r, const struct want *w)
{
	if (!r || r->kind != w->kind)
		return false;
	if (w->kind != UNW_RSP && w->kind != UNW_RBP && w->kind != UNW_SIGNAL)
		return true;
	return r->cfa_off == w->cfa_off && r->rbp == w->rbp &&
	       (w->rbp != UNW_RBP_AT || r->rbp_off == w->rbp_off);
}

/* One file: its rows against readelf's */
static void against_readelf(const char *path)
{
	const struct unw_row *rows;
	size_t n, len;
	char why[256], cmd[600], line[1024], cols[40][16];
	int ncols = 0, fd = open(path, O_RDONLY | O_CLOEXEC), rc;
	unsigned long checked = 0, bad = 0, fdes = 0;
	uint64_t lo = 0, hi = 0, prev = 0;
	bool in_fde = false, any = false, signal = false;
	unsigned long sig_cies[64];	/* CIEs of signal frames ("zRS") */
	int nsig = 0;
	char cie_cfa[32] = "", cie_ra[32] = "";
	struct want pw = { 0 };
	void *blob;
	FILE *p;

	if (fd < 0) {
		diag("%s: %s: not compared", path, strerror(errno));
		return;
	}
	rc = unwind_file_rows(fd, path, &rows, &n, why, sizeof(why));
	close(fd);
	ok(!rc && n > 10, "%s: %zu rows (%s)", path, n, rc ? why : "ok");
	if (rc)
		return;
	blob = blob_of(rows, n, &len);
	is_int(unw_check(blob, len, why, sizeof(why)), 0, "%s: the table passes the check", path);
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p) {
		free(blob);
		return;
	}
	/* an FDE's rows end where its range ends: the last row is checked
	 * at its own address and at the byte before the end */
#define CHECK(at, w) do {							\
		const struct unw_row *r_ = unw_find(blob, (at) + 0);		\
		checked++;							\
		if (!same(r_, &(w)) && bad++ < 8)				\
			diag("%s: at %#" PRIx64 ": kind %d cfa %ld rbp %d/%ld wanted, "	\
			     "kind %d cfa %d rbp %d/%d in the table", path, (uint64_t)(at), \
			     (w).kind, (w).cfa_off, (w).rbp, (w).rbp_off,		\
			     r_ ? r_->kind : -1, r_ ? r_->cfa_off : 0,		\
			     r_ ? r_->rbp : -1, r_ ? r_->rbp_off : 0);		\
	} while (0)
	while (fgets(line, sizeof(line), p)) {
		char a[32];
		uint64_t loc;

		line[strcspn(line, "\n")] = 0;
		if (strstr(line, "ZERO terminator")) {	/* the section's end */
			if (in_fde && any)
				CHECK(hi - 1, pw);
			in_fde = any = false;
			ncols = 0;
			continue;
		}
		if (strstr(line, " CIE \"")) {
			char *aug = strchr(line, '"');

			if (aug && strchr(aug + 1, 'S') && strchr(aug + 1, 'S') < strchr(aug + 1, '"') &&
			    nsig < 64)
				sig_cies[nsig++] = strtoul(line, NULL, 16);
			in_fde = false;
			cie_cfa[0] = cie_ra[0] = 0;
			ncols = 0;
			continue;
		}
		if (strstr(line, " FDE cie=")) {
			char *pc = strstr(line, "pc="), *ce = strstr(line, "cie=");
			unsigned long cie = ce ? strtoul(ce + 4, NULL, 16) : 0;

			if (in_fde && any)
				CHECK(hi - 1, pw);
			else if (in_fde && cie_cfa[0]) {	/* no rows: the CIE's */
				pw = want_of(cie_cfa, cie_ra, NULL, signal);
				CHECK(lo, pw);
				CHECK(hi - 1, pw);
			}
			signal = false;
			for (int i = 0; i < nsig; i++)
				signal |= sig_cies[i] == cie;
			in_fde = pc && sscanf(pc, "pc=%" SCNx64 "..%" SCNx64, &lo, &hi) == 2 && hi > lo;
			fdes += in_fde;
			any = false;
			continue;
		}
		if (strstr(line, "   LOC")) {
			char *save, *t = strtok_r(line, " ", &save);

			for (ncols = 0; t && ncols < 40; t = strtok_r(NULL, " ", &save))
				snprintf(cols[ncols++], sizeof(cols[0]), "%s", t);
			continue;
		}
		if (ncols >= 3 && sscanf(line, "%" SCNx64 " %31s", &loc, a) == 2) {
			char *save, *t = strtok_r(line, " ", &save), *cfa = NULL, *ra = NULL, *rbp = NULL;
			char v[40][32];
			int k = 0;

			for (; t && k < 40; t = strtok_r(NULL, " ", &save))
				if (t[0] == '(' && k)	/* "r10 (r10)": one value */
					continue;
				else
					snprintf(v[k++], sizeof(v[0]), "%s", t);
			for (int i = 1; i < k && i < ncols; i++) {
				if (!strcmp(cols[i], "CFA"))
					cfa = v[i];
				else if (!strcmp(cols[i], "ra"))
					ra = v[i];
				else if (!strcmp(cols[i], "rbp"))
					rbp = v[i];
			}
			if (!cfa || !ra) {
				if (bad++ < 8)
					diag("%s: a row at %#" PRIx64 " without CFA or ra columns",
					     path, loc);
				continue;
			}
			if (!in_fde) {	/* the CIE's initial row */
				snprintf(cie_cfa, sizeof(cie_cfa), "%s", cfa);
				snprintf(cie_ra, sizeof(cie_ra), "%s", ra);
				continue;
			}
			if (any && loc > prev)
				CHECK(loc - 1, pw);	/* the row before, at its last byte */
			pw = want_of(cfa, ra, rbp, signal);
			CHECK(loc, pw);
			prev = loc;
			any = true;
		}
	}
	if (in_fde && any)
		CHECK(hi - 1, pw);
	pclose(p);
	/* hints: any value, right or torn, gives unw_find()'s row */
	{
		unsigned long wrong = 0;
		uint64_t hint = 0, top = rows[n - 1].pc + 64;

		for (int i = 0; i < 200000; i++) {
			uint64_t pc = test_xorshift() % top, h = hint;

			if (i % 3 == 0)
				h = test_xorshift();
			else if (i % 3 == 1)
				h = (test_xorshift() % 2) << 32 | (test_xorshift() % (n + 2));
			if (unw_find_hint(blob, pc, &h) != unw_find(blob, pc))
				wrong++;
			hint = h;
		}
		ok(!wrong, "%s: 200000 lookups with stale, random and torn hints: the same rows "
		   "(%lu differ)", path, wrong);
	}
	ok(fdes > 5 && checked > 2 * fdes && !bad,
	   "%s: %lu FDEs, %lu addresses compared with readelf, %lu differ", path, fdes, checked, bad);
	free(blob);
#undef CHECK
}

/* The check refuses a blob with one thing broken */
static void check_refuses(void)
{
	struct unw_row rows[3] = {
		{ .pc = 0x100, .kind = UNW_RSP, .cfa_off = 8 },
		{ .pc = 0x104, .kind = UNW_RSP, .cfa_off = 16, .rbp = UNW_RBP_AT, .rbp_off = -16 },
		{ .pc = 0x200, .kind = UNW_NONE },
	};
	size_t len;
	char why[256];
	unsigned char *b = blob_of(rows, 3, &len), *c = malloc(len);
	struct unw_hdr *h = (void *)c;
	struct unw_mod *m = (void *)(h + 1);
	struct unw_row *r = (void *)(m + 1);
	const struct unw_row *f;

	is_int(unw_check(b, len, why, sizeof(why)), 0, "a good blob passes");
	f = unw_find((const void *)b, 0x103);
	ok(f && f->pc == 0x100, "0x103 is in the first row");
	f = unw_find((const void *)b, 0x1ff);
	ok(f && f->pc == 0x104 && f->rbp_off == -16, "0x1ff in the second");
	f = unw_find((const void *)b, 0x200);
	ok(f && f->kind == UNW_NONE, "0x200: the end row");
	ok(!unw_find((const void *)b, 0x80), "before the first row: none");
	ok(!unw_find((const void *)b, 0), "outside the module: none");
#define BROKEN(what, stmt, blen) do {						\
		memcpy(c, b, len);						\
		stmt;								\
		int rc_ = unw_check(c, blen, why, sizeof(why));		\
		ok(rc_ == -EINVAL, "refused: %s (%s)", what, why);		\
	} while (0)
	BROKEN("a wrong magic", h->magic ^= 1, len);
	BROKEN("another version", h->version = 2, len);
	BROKEN("a short blob", (void)0, len - 1);
	BROKEN("a size field that lies", h->size += 12, len);
	BROKEN("more rows than the blob holds", h->nrows = 4, len);
	BROKEN("more modules than the blob holds", h->nmods = 2, len);
	BROKEN("a module's rows past the array", m->first = 1, len);
	BROKEN("a module of no rows", m->nrows = 0, len);
	BROKEN("an empty module range", m->hi = m->lo, len);
	BROKEN("rows out of order", r[1].pc = 0x100, len);
	BROKEN("an unknown kind", r[1].kind = 9, len);
	BROKEN("an unknown rbp rule", r[0].rbp = 7, len);
	BROKEN("a last row that is not an end", r[2].kind = UNW_RSP, len);
	BROKEN("a huge row count", h->nrows = UINT32_MAX, len);
	/* random bytes: refused or, if by chance accepted, still looked up
	 * inside the blob (ASan would see a read outside) */
	for (int i = 0; i < 20000; i++) {
		memcpy(c, b, len);
		for (int k = 0; k < 1 + i % 4; k++)
			c[test_xorshift() % len] = (unsigned char)test_xorshift();
		if (!unw_check(c, len, why, sizeof(why)))
			for (int k = 0; k < 8; k++)
				(void)unw_find((const void *)c, test_xorshift() % 0x300);
	}
	ok(1, "20000 blobs with random bytes: checked and looked up without a fault");
#undef BROKEN
	free(b);
	free(c);
}

static int here(int x)
{
	return x * 3;
}

int main(int argc, char **argv)
{
	const char *build = getenv("FAY_BUILD");
	char nofp[512];
	unsigned nmods = 0, nrows = 0;
	uint64_t sig = 0;
	char why[256];
	int fd, seals, rc;
	struct stat st;

	(void)argc;
	if (system("readelf --version >/dev/null 2>&1"))
		skip_all("no readelf");
	against_readelf("/lib/x86_64-linux-gnu/libc.so.6");
	against_readelf("/lib/x86_64-linux-gnu/liblzma.so.5");
	snprintf(nofp, sizeof(nofp), "%s/tests/bin/stack_work_nofp", build ? build : "build");
	if (access(nofp, R_OK))	/* the test's own build tree */
		snprintf(nofp, sizeof(nofp), "%.*s/../../bin/stack_work_nofp",
			 (int)(strrchr(argv[0], '/') ? strrchr(argv[0], '/') - argv[0] : 1),
			 strrchr(argv[0], '/') ? argv[0] : ".");
	ok(!access(nofp, R_OK), "stack_work built without frame pointers: %.300s", nofp);
	against_readelf(nofp);

	fd = unwind_process_memfd(getpid(), NULL, &nmods, &nrows, &sig, why, sizeof(why));
	ok(fd >= 0, "this process's table: %u modules, %u rows (%s)", nmods, nrows,
	   fd < 0 ? why : "ok");
	if (fd >= 0) {
		void *p;
		const struct unw_row *r;

		seals = fcntl(fd, F_GET_SEALS);
		ok(seals >= 0 && (seals & F_SEAL_WRITE) && (seals & F_SEAL_SHRINK) &&
		   (seals & F_SEAL_GROW) && (seals & F_SEAL_SEAL), "its memfd is sealed (%#x)", seals);
		rc = fstat(fd, &st);
		ok(!rc && st.st_size > 0, "of %lld bytes", (long long)st.st_size);
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		ok(p != MAP_FAILED && !unw_check(p, (size_t)st.st_size, why, sizeof(why)),
		   "mapped read-only, it passes the check");
		if (p != MAP_FAILED) {
			r = unw_find(p, (uint64_t)(uintptr_t)&here);
			ok(r && r->kind == UNW_RSP && r->cfa_off == 8,
			   "this test's function at its first byte: CFA = rsp + 8 (%d %d)",
			   r ? r->kind : -1, r ? r->cfa_off : 0);
			r = unw_find(p, (uint64_t)(uintptr_t)&getpid);
			ok(r && r->kind != UNW_NONE, "libc's getpid has a row");
			ok(!unw_find(p, (uint64_t)(uintptr_t)&st), "a stack address has none");
			munmap(p, (size_t)st.st_size);
		}
		close(fd);
	}
	ok(sig && sig == unwind_process_sig(getpid(), NULL),
	   "the maps' signature: the same when read again");
	{
		long pg = sysconf(_SC_PAGESIZE);
		int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
		void *m = self >= 0 ? mmap(NULL, (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, self, 0)
				    : MAP_FAILED;
		uint64_t s2 = unwind_process_sig(getpid(), NULL);

		ok(m != MAP_FAILED && s2 && s2 != sig,
		   "another executable file mapping (as a dlopen makes): another signature");
		if (m != MAP_FAILED)
			munmap(m, (size_t)pg);
		if (self >= 0)
			close(self);
		ok(unwind_process_sig(getpid(), NULL) == sig, "... and the first again once it is gone");
	}
	fd = unwind_process_memfd(getpid(), "/libc.so.6", &nmods, &nrows, &sig, why, sizeof(why));
	if (fd >= 0) {
		void *p;

		fstat(fd, &st);
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		ok(p != MAP_FAILED && !unw_find(p, (uint64_t)(uintptr_t)&getpid),
		   "a file skipped (libc) is not in the table");
		if (p != MAP_FAILED)
			munmap(p, (size_t)st.st_size);
		close(fd);
	}
	check_refuses();
	unwind_cache_free();
	return test_done();
}
