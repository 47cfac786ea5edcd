// SPDX-License-Identifier: MIT
/*
 * Programs built against the public headers and linked with libfay.so
 * (tests/compile, mk/compile.mk) run and record: the strict C11 one, the
 * C++ one, and the unchanged ceph/blkin-style one.  Their shm files are
 * read back and checked against the ids the programs print.
 */
#include <dlfcn.h>
#include <libgen.h>

#include "libtest.h"

static char progdir[PATH_MAX];

/* Run prog with FAY_SHM_DIR=<lt_dir>/<name>; its first output line goes to
 * out.  Maps its file into v.  0 on success. */
static int run(const char *name, char *out, size_t outlen, struct lt_view *v)
{
	char cmd[PATH_MAX * 3], dir[PATH_MAX + 64], path[PATH_MAX * 2];
	FILE *p;
	int st;

	if (snprintf(dir, sizeof(dir), "%s/%s", lt_dir, name) >= (int)sizeof(dir) ||
	    snprintf(cmd, sizeof(cmd), "FAY_SHM_DIR='%s' '%s/%s'", dir, progdir,
		     name) >= (int)sizeof(cmd))
		return -1;
	mkdir(dir, 0700);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (!fgets(out, (int)outlen, p))
		out[0] = 0;
	out[strcspn(out, "\n")] = 0;
	st = pclose(p);
	if (st != 0) {
		diag("%s exited with status %d", name, st);
		return -1;
	}
	if (lt_count_in(dir, FAY_SHM_PREFIX, path, sizeof(path)) != 1)
		return -1;
	return lt_map(path, v);
}

static void test_c11(void)
{
	char out[128];
	struct lt_view v;
	struct lt_spans sp;
	uint64_t hi, lo, id;
	unsigned f;
	const struct lt_span *c;

	if (run("trace_c", out, sizeof(out), &v)) {
		ok(0, "C11 program ran and made its file");
		return;
	}
	ok(!lt_tp(out, &hi, &lo, &id, &f) && f == 1, "C11 program printed a traceparent: %s", out);
	lt_read_all(&v, &sp);
	is_int(sp.n, 2, "C11 program recorded 2 spans");
	c = lt_by_id(&sp, id);
	ok(c && c->r.f.trace_hi == hi && c->r.f.trace_lo == lo && c->r.f.parent_id &&
	   lt_by_id(&sp, c->r.f.parent_id), "its child span, under its root");
	is_str(v.hdr->service, "compile-c", "service from fay_init");
	lt_spans_free(&sp);
	lt_unmap(&v);
}

static void test_cxx(void)
{
	char out[128];
	struct lt_view v;
	struct lt_spans sp;
	uint64_t hi, lo, id;
	unsigned f;
	const struct lt_span *s;
	int partial = 0;

	if (run("trace_cc", out, sizeof(out), &v)) {
		ok(0, "C++ program ran and made its file");
		return;
	}
	ok(!lt_tp(out, &hi, &lo, &id, &f), "C++ program printed a traceparent: %s", out);
	lt_read_all(&v, &sp);
	is_int(sp.n, 3, "C++ program recorded client, server and a blkin annotation");
	s = lt_by_id(&sp, id);
	ok(s && lt_streq(s->r.name, "c++ server") && lt_by_id(&sp, s->r.f.parent_id) &&
	   lt_streq(lt_by_id(&sp, s->r.f.parent_id)->r.name, "c++ client"),
	   "server span (from the client's traceparent) under the client span");
	for (size_t i = 0; i < sp.n; i++)
		if (sp.v[i].r.f.flags & SPAN_F_PARTIAL)
			partial++;
	is_int(partial, 1, "one partial (blkin) record");
	lt_spans_free(&sp);
	lt_unmap(&v);
}

static void test_blkin_prog(void)
{
	char out[128];
	struct lt_view v;
	struct lt_spans sp;
	long long trace = 0, span = 0, child = 0;
	int nclient = 0, nserver = 0, good = 1;

	if (run("blkin_prog", out, sizeof(out), &v)) {
		ok(0, "BlkKin program ran and made its file");
		return;
	}
	ok(sscanf(out, "%lld %lld %lld", &trace, &span, &child) == 3 && trace > 0,
	   "BlkKin program printed its ids: %s", out);
	lt_read_all(&v, &sp);
	is_int(sp.n, 6, "6 annotations recorded (cs, kv, cr, sr, kv, ss)");
	for (size_t i = 0; i < sp.n; i++) {
		const struct spanrec_fixed *fx = &sp.v[i].r.f;

		if (fx->trace_lo != (uint64_t)trace || fx->trace_hi ||
		    fx->flags != (SPAN_F_PARTIAL | SPAN_F_SAMPLED))
			good = 0;
		if (fx->span_id == (uint64_t)span && !fx->parent_id &&
		    lt_streq(sp.v[i].r.name, "rbd_write"))
			nclient++;
		else if (fx->span_id == (uint64_t)child && fx->parent_id == (uint64_t)span &&
			 lt_streq(sp.v[i].r.name, "osd_op") &&
			 lt_streq(sp.v[i].r.local.service, "osd.0") && sp.v[i].r.local.port == 6800)
			nserver++;
		else
			good = 0;
	}
	ok(good && nclient == 3 && nserver == 3,
	   "client and server records carry BlkKin's ids, names and endpoints");
	is_str(v.hdr->service, "blkin_prog", "blkin_init() names the service after the program");
	lt_spans_free(&sp);
	lt_unmap(&v);
}

/* libfay.so exports its API and nothing else (src/lib/libfay.map). */
static void test_exports(void)
{
	static const char *api[] = {
		"fay_init", "fay_set_sampling", "fay_set_sampling_rate",
		"fay_span_root", "fay_span_child", "fay_span_remote",
		"fay_span_traceparent", "fay_span_event", "fay_span_tag",
		"fay_span_tag_int", "fay_span_end", "blkin_init", "blkin_record",
		"blkin_init_new_trace", "blkin_init_child_info",
		"blkin_pack_trace_info", "CLIENT_SEND", "fay_fast_tls_1", "fay_fast_gen",
	};
	static const char *internal[] = {
		"lib", "lib_t", "lib_pool_get", "lib_write_record", "rand_u64",
		"ring_write", "spanrec_put_item", "spanrec_decode", "clock_parse_duration",
	};
	char so[PATH_MAX + 32];
	void *h;
	int all = 1, none = 1;

	snprintf(so, sizeof(so), "%s/../../libfay.so", progdir);
	h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	ok(h != NULL, "dlopen libfay.so (%s)", h ? "ok" : dlerror());
	if (!h)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(api); i++)
		if (!dlsym(h, api[i])) {
			diag("not exported: %s", api[i]);
			all = 0;
		}
	for (size_t i = 0; i < ARRAY_SIZE(internal); i++)
		if (dlsym(h, internal[i])) {
			diag("exported but internal: %s", internal[i]);
			none = 0;
		}
	ok(all, "the API is exported");
	ok(none, "internal symbols are not");
	dlclose(h);
}

int main(void)
{
	char self[PATH_MAX], probe[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		skip_all("cannot read /proc/self/exe");
	self[n] = 0;
	/* <build>/tests/unit/lib/test_linked -> <build>/tests/compile */
	snprintf(progdir, sizeof(progdir), "%s/../../compile", dirname(self));
	snprintf(probe, sizeof(probe), "%s/blkin_prog", progdir);
	if (access(probe, X_OK))
		skip_all("%s not built (make tests builds tests/compile)", probe);
	lt_setup();
	unsetenv("FAY_SERVICE");
	unsetenv("FAY_SAMPLE");
	unsetenv("FAY_DISABLE");
	setenv("FAY_RINGS", "2", 1);
	test_c11();
	test_cxx();
	test_blkin_prog();
	test_exports();
	return test_done();
}
