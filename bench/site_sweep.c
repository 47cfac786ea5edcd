// SPDX-License-Identifier: MIT
/*
 * site_sweep: every exported function of a library, patched inline in a
 * live process (this one) and detached, with the process's self-check
 * after each batch.
 *
 * For each library named: its exported functions (STT_FUNC in .dynsym;
 * Debian ships these libraries without .symtab) are analysed by the
 * patcher (patch_site_new_room(), size from the symbol, room up to the
 * next symbol, as fay does), which counts the inline share and the
 * refusal reasons.  Then, in batches of -b sites, a child process (one
 * per batch: a crash costs only its batch) arms every accepted site of
 * the batch with an entry and an exit probe (entry only for the
 * functions that return twice: setjmp & co., whose callers' frames a
 * call-through exit probe would move), runs the self-check (zlib,
 * sqlite3, libcrypto, liblzma and libc work whose results are digested
 * and compared with the digest computed before anything was patched),
 * disarms them all and runs the self-check again.  A batch whose child
 * dies or fails its check is run again one site per child, to name the
 * sites.
 *
 * usage: site_sweep [-b BATCH] [-v] LIB...   e.g. libc.so.6 libz.so.1
 * Output: one line per library:
 *   LIB: N symbols, M sites, K inline (P%), crashed C, wrong W
 * followed by the refusal reasons with their counts.  Exit status 1 when
 * any child crashed or failed its check.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <lzma.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "patch/patch.h"
#include "probe/elfsym.h"

/* ---- the self-check ------------------------------------------------------ */

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t mix_u(uint64_t h, uint64_t v)
{
	return mix(h, &v, sizeof(v));
}

static uint8_t text[65536];

static uint64_t check_zlib(uint64_t h)
{
	static uint8_t z[70000], back[65536];
	uLongf zn = sizeof(z), bn = sizeof(back);

	if (compress2(z, &zn, text, sizeof(text), 6) != Z_OK ||
	    uncompress(back, &bn, z, zn) != Z_OK || bn != sizeof(text) ||
	    memcmp(back, text, bn))
		return 0;
	h = mix(h, z, zn);
	h = mix_u(h, crc32(0, text, sizeof(text)));
	return mix_u(h, adler32(1, text, sizeof(text)));
}

static int sum_cb(void *arg, int n, char **v, char **names)
{
	uint64_t *h = arg;

	(void)names;
	for (int i = 0; i < n; i++)
		*h = mix(*h, v[i] ? v[i] : "NULL", strlen(v[i] ? v[i] : "NULL"));
	return 0;
}

static uint64_t check_sqlite(uint64_t h)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 0;
	sqlite3_exec(db, "create table t(a integer, b text)", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(db, "insert into t values(?, ?)", -1, &st, NULL) != SQLITE_OK)
		return sqlite3_close(db), 0;
	for (int i = 0; i < 300; i++) {
		char b[32];

		snprintf(b, sizeof(b), "row %d", i * 7);
		sqlite3_bind_int(st, 1, i);
		sqlite3_bind_text(st, 2, b, -1, SQLITE_TRANSIENT);
		sqlite3_step(st);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_exec(db, "select sum(a), count(*), max(b), group_concat(substr(b, 5), ',') "
		     "from t where a % 3 = 1", sum_cb, &h, NULL);
	sqlite3_close(db);
	return h;
}

static uint64_t check_crypto(uint64_t h)
{
	uint8_t md[EVP_MAX_MD_SIZE], key[16] = "0123456789abcdef", iv[16] = { 0 };
	static uint8_t enc[65536 + 32], dec[65536 + 32];
	unsigned int n = 0;
	int l1 = 0, l2 = 0, d1 = 0, d2 = 0;
	EVP_CIPHER_CTX *c;

	if (!EVP_Digest(text, sizeof(text), md, &n, EVP_sha256(), NULL))
		return 0;
	h = mix(h, md, n);
	if (!EVP_Digest(text, 1000, md, &n, EVP_md5(), NULL))
		return 0;
	h = mix(h, md, n);
	c = EVP_CIPHER_CTX_new();
	if (!c || !EVP_EncryptInit_ex(c, EVP_aes_128_cbc(), NULL, key, iv) ||
	    !EVP_EncryptUpdate(c, enc, &l1, text, 4096) ||
	    !EVP_EncryptFinal_ex(c, enc + l1, &l2) ||
	    !EVP_DecryptInit_ex(c, EVP_aes_128_cbc(), NULL, key, iv) ||
	    !EVP_DecryptUpdate(c, dec, &d1, enc, l1 + l2) ||
	    !EVP_DecryptFinal_ex(c, dec + d1, &d2) || d1 + d2 != 4096 || memcmp(dec, text, 4096)) {
		EVP_CIPHER_CTX_free(c);
		return 0;
	}
	EVP_CIPHER_CTX_free(c);
	return mix(h, enc, (size_t)(l1 + l2));
}

static uint64_t check_lzma(uint64_t h)
{
	static uint8_t x[70000], back[65536];
	size_t xn = 0, in = 0, bn = 0;
	uint64_t limit = UINT64_MAX;

	if (lzma_easy_buffer_encode(1, LZMA_CHECK_CRC64, NULL, text, sizeof(text), x, &xn,
				    sizeof(x)) != LZMA_OK ||
	    lzma_stream_buffer_decode(&limit, 0, NULL, x, &in, xn, back, &bn,
				      sizeof(back)) != LZMA_OK ||
	    bn != sizeof(text) || memcmp(back, text, bn))
		return 0;
	return mix(h, x, xn);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void *thread_fn(void *arg)
{
	uint64_t *h = arg;
	char s[64];

	snprintf(s, sizeof(s), "%s-%d-%.3f", "thread", 42, 2.5);
	*h = mix(*h, s, strlen(s));
	return NULL;
}

static uint64_t check_libc(uint64_t h)
{
	int v[1000];
	char buf[256], *p, *q;
	double d;
	pthread_t t;
	uint64_t th = 1;
	FILE *f;

	for (int i = 0; i < 1000; i++)
		v[i] = (i * 7919) % 1000;
	qsort(v, 1000, sizeof(v[0]), cmp_int);
	h = mix(h, v, sizeof(v));
	snprintf(buf, sizeof(buf), "%d %s %.4f %lx %5.2e", -17, "abc", 3.14159, 0xdeadUL, 1e-3);
	h = mix(h, buf, strlen(buf));
	d = strtod("2.71828e2", &p);
	h = mix(h, &d, sizeof(d));
	h = mix_u(h, strtoul("12345", NULL, 10) + strlen(buf) + (strchr(buf, 'a') - buf) +
		      (uint64_t)(strcmp(buf, "abc") > 0) + (uint64_t)(memcmp(buf, "-17", 3) == 0));
	p = malloc(100);
	q = calloc(10, 10);
	if (!p || !q)
		return 0;
	memset(p, 'x', 100);
	memcpy(q, p, 50);
	p = realloc(p, 10000);
	if (!p)
		return 0;
	memmove(p + 1, p, 99);
	h = mix(h, q, 100);
	h = mix(h, p, 100);
	free(p);
	free(q);
	p = strdup("a,b;c,d");
	for (q = strtok(p, ",;"); q; q = strtok(NULL, ",;"))
		h = mix(h, q, strlen(q));
	free(p);
	if (pthread_create(&t, NULL, thread_fn, &th) || pthread_join(t, NULL))
		return 0;
	h = mix_u(h, th);
	f = tmpfile();
	if (!f)
		return 0;
	fprintf(f, "line %d\n", 99);
	rewind(f);
	if (!fgets(buf, sizeof(buf), f))
		return fclose(f), 0;
	fclose(f);
	h = mix(h, buf, strlen(buf));
	h = mix_u(h, (uint64_t)toupper('q') + (uint64_t)abs(-5) + (uint64_t)(getpid() > 0));
	return h;
}

static uint64_t self_check(void)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = check_zlib(h);
	h = h ? check_sqlite(h) : 0;
	h = h ? check_crypto(h) : 0;
	h = h ? check_lzma(h) : 0;
	h = h ? check_libc(h) : 0;
	return h;
}

/* ---- sites ---------------------------------------------------------------- */

struct site {
	char *name;
	uint64_t addr, size, room;
	bool ok;
	char why[160];
};

struct sweep {
	struct site *s;
	size_t n, cap;
	uint64_t base;
	int nsyms;
};

static int add_sym(const char *name, uint64_t addr, uint64_t size, void *arg)
{
	struct sweep *w = arg;

	w->nsyms++;
	for (size_t i = 0; i < w->n; i++)
		if (w->s[i].addr == w->base + addr)
			return 0;	/* an alias of a site we have */
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->s = realloc(w->s, w->cap * sizeof(*w->s));
		if (!w->s)
			return -ENOMEM;
	}
	w->s[w->n++] = (struct site){ .name = strdup(name), .addr = w->base + addr,
				      .size = size };
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct find_lib {
	const char *want;
	char path[4096];
	uint64_t base;
};

static int find_lib_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_lib *fl = arg;
	const char *slash = strrchr(info->dlpi_name, '/');

	(void)size;
	if (!slash || strcmp(slash + 1, fl->want))
		return 0;
	snprintf(fl->path, sizeof(fl->path), "%s", info->dlpi_name);
	fl->base = info->dlpi_addr;
	return 1;
}

/* The reason without its instance (addresses, offsets, instruction text). */
static void reason_class(const char *why, char *out, size_t len)
{
	size_t o = 0;
	int paren = 0;
	const char *p = why;

	if (!strncmp(p, "instruction ", 12)) {	/* "instruction 1 at +3 (je ...) " */
		const char *e = strchr(p, ')');

		if (e)
			p = e + 2;
	}
	for (; *p && o + 2 < len; p++) {
		if (*p == '(')
			paren++;
		else if (*p == ')')
			paren--;
		else if (!paren && isdigit((unsigned char)*p)) {
			if (o == 0 || out[o - 1] != 'N')
				out[o++] = 'N';
		} else if (!paren && !(*p == ' ' && (o == 0 || out[o - 1] == ' ')))
			out[o++] = *p;
	}
	while (o && out[o - 1] == ' ')
		o--;
	out[o] = 0;
}

static bool returns_twice(const char *n)
{
	static const char *const names[] = { "setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp",
					     "savectx", "vfork", "__vfork", "getcontext",
					     "swapcontext", NULL };

	for (int i = 0; names[i]; i++)
		if (!strcmp(n, names[i]))
			return true;
	return false;
}

static long calls;

static void on_call(struct patch_regs *r, void *arg)
{
	(void)r;
	(void)arg;
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
}

/* In a child: arm sites [from, to), check, disarm, check.  Exit status:
 * 0 right, 2 wrong while armed, 3 wrong after, 4 an arm failed. */
static int run_batch(struct sweep *w, size_t from, size_t to, uint64_t want, bool verbose)
{
	struct patch_site **ps = calloc(to - from, sizeof(*ps));
	char err[256];
	int rc = 0;

	if (!ps)
		return 4;
	for (size_t i = from; i < to; i++) {
		struct site *s = &w->s[i];

		if (!s->ok)
			continue;
		ps[i - from] = patch_site_new_room((void *)(uintptr_t)s->addr, s->size, s->room,
						   err, sizeof(err));
		if (!ps[i - from] ||
		    patch_site_arm(ps[i - from], on_call, returns_twice(s->name) ? NULL : on_call,
				   NULL, err, sizeof(err))) {
			fprintf(stderr, "  %s: not armed: %s\n", s->name, err);
			rc = 4;
		}
	}
	if (self_check() != want)
		rc = rc ? rc : 2;
	for (size_t i = from; i < to; i++)
		patch_site_free(ps[i - from]);
	if (self_check() != want)
		rc = rc ? rc : 3;
	if (verbose)
		fprintf(stderr, "  batch %zu..%zu: %ld probe calls, status %d\n", from, to, calls,
			rc);
	return rc;
}

/* Run [from, to) in a child; its wait status. */
static int child(struct sweep *w, size_t from, size_t to, uint64_t want, bool verbose)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(run_batch(w, from, to, want, verbose));
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

static bool bad(int st)
{
	return st == -1 || !WIFEXITED(st) || WEXITSTATUS(st);
}

static int sweep_lib(const char *lib, size_t batch, uint64_t want, bool verbose)
{
	struct find_lib fl = { .want = lib };
	struct sweep w = { 0 };
	struct { char what[160]; int n; } reasons[64] = { 0 };
	int nreasons = 0, inl = 0, crashed = 0, wrong = 0, rc;

	if (!dlopen(lib, RTLD_NOW | RTLD_GLOBAL) || !dl_iterate_phdr(find_lib_cb, &fl)) {
		fprintf(stderr, "%s: not loaded: %s\n", lib, dlerror());
		return 1;
	}
	w.base = fl.base;
	rc = elf_foreach_func(fl.path, add_sym, &w);
	if (rc) {
		fprintf(stderr, "%s: %s: %s\n", lib, fl.path, strerror(-rc));
		return 1;
	}
	qsort(w.s, w.n, sizeof(*w.s), by_addr);
	for (size_t i = 0; i < w.n; i++) {
		struct site *s = &w.s[i];
		struct patch_site *ps;
		char cls[160];
		int r;

		s->room = i + 1 < w.n ? w.s[i + 1].addr - s->addr : s->size;
		if (s->room < s->size)
			s->room = s->size;
		ps = patch_site_new_room((void *)(uintptr_t)s->addr, s->size, s->room, s->why,
					 sizeof(s->why));
		s->ok = ps != NULL;
		patch_site_free(ps);
		if (s->ok) {
			inl++;
			continue;
		}
		reason_class(s->why, cls, sizeof(cls));
		for (r = 0; r < nreasons && strcmp(reasons[r].what, cls); r++)
			;
		if (r == nreasons && nreasons < 64)
			snprintf(reasons[nreasons++].what, sizeof(reasons[0].what), "%s", cls);
		if (r < 64)
			reasons[r].n++;
		if (verbose)
			fprintf(stderr, "  refused %s: %s\n", s->name, s->why);
	}
	for (size_t from = 0; from < w.n; from += batch) {
		size_t to = from + batch < w.n ? from + batch : w.n;
		int st = child(&w, from, to, want, verbose);

		if (!bad(st))
			continue;
		for (size_t i = from; i < to; i++) {	/* which ones */
			if (!w.s[i].ok)
				continue;
			st = child(&w, i, i + 1, want, false);
			if (!bad(st))
				continue;
			if (WIFSIGNALED(st))
				crashed++;
			else
				wrong++;
			printf("  %s %s (+%#llx): %s %d\n", lib, w.s[i].name,
			       (unsigned long long)(w.s[i].addr - w.base),
			       WIFSIGNALED(st) ? "crash, signal" : "wrong results, status",
			       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		}
	}
	printf("%s: %d symbols, %zu sites, %d inline (%.1f%%), crashed %d, wrong %d\n", lib,
	       w.nsyms, w.n, inl, w.n ? 100.0 * inl / (double)w.n : 0.0, crashed, wrong);
	for (int r = 0; r < nreasons; r++)
		printf("    %5d  %s\n", reasons[r].n, reasons[r].what);
	for (size_t i = 0; i < w.n; i++)
		free(w.s[i].name);
	free(w.s);
	return crashed || wrong;
}

int main(int argc, char **argv)
{
	size_t batch = 100;
	bool verbose = false;
	uint64_t want;
	int opt, rc = 0;

	while ((opt = getopt(argc, argv, "b:v")) != -1) {
		if (opt == 'b')
			batch = (size_t)strtoul(optarg, NULL, 10);
		else if (opt == 'v')
			verbose = true;
		else
			return fprintf(stderr, "usage: site_sweep [-b BATCH] [-v] LIB...\n"), 2;
	}
	if (!batch)
		batch = 1;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (uint8_t)("the quick brown fox jumps over the lazy dog "[i % 44] ^
				    ((i / 997) & 3));
	want = self_check();
	if (!want || want != self_check()) {
		fprintf(stderr, "site_sweep: the self-check fails or varies unpatched\n");
		return 2;
	}
	for (int i = optind; i < argc; i++)
		rc |= sweep_lib(argv[i], batch, want, verbose);
	return rc;
}
