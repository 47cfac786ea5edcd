// SPDX-License-Identifier: MIT
/*
 * kernel.function: count K reads of /dev/zero through vfs_read, once with
 * fentry/fexit and once with kprobe/kretprobe.  A kernel that allows a
 * mechanism must count exactly; one that allows neither must say so
 * plainly (this is the case on the development host; the QEMU guest of
 * tests/vm/bpf_kfunc.sh allows both, and sets FAY_EXPECT_KFUNC=1 so a
 * refusal there is a failure).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "test.h"
#include "progs.h"
#include "probe/probe.h"

#define K 500

enum { S_CALLS, S_SIZES, S_RETS, S_N };

static void count_reads(bool no_fentry)
{
	const char *mode = no_fentry ? "kprobe" : "fentry";
	struct probe_opts po = { .sz = sizeof(po), .no_fentry = no_fentry };
	struct bmap *st = bmap_new("kstats", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, S_N);
	char err[300], buf[64];
	struct probe *pe, *px = NULL;
	struct bprog *ge = NULL, *gx = NULL;
	struct ir *ie = NULL, *ix = NULL;
	bool expect = getenv("FAY_EXPECT_KFUNC") != NULL;
	uint32_t ids[2] = { 0, 0 };
	int fd;

	pe = probe_new(PROBE_KFUNC, "vfs_read", &po, err, sizeof(err));
	if (!pe) {
		ok(!expect && (strstr(err, "allows neither") || strstr(err, "needs root")),
		   "%s: refused plainly: %s", mode, err);
		goto out;
	}
	px = probe_new(PROBE_KFUNC_EXIT, "vfs_read", &po, err, sizeof(err));
	ok(px != NULL, "%s: exit probe resolves: %s", mode, px ? probe_describe(px) : err);
	if (!px)
		goto out;
	ok(!strcmp(probe_mechanism(pe), no_fentry ? "kprobe" : "fentry"),
	   "%s: mechanism is %s", mode, probe_mechanism(pe));
	is_int(probe_nargs(pe), 4, "%s: vfs_read has 4 arguments (BTF)", mode);

	ie = ir_new("k_entry");
	{
		int key = ir_stack_alloc(ie, 8, 8), out = ir_label_new(ie);
		ir_reg n = ir_vreg(ie);

		emit_only_tgid(ie, getpid(), out);
		is_int(probe_emit_arg(pe, ie, n, 2), 0, "%s: arg(2)", mode);
		emit_array_add(ie, st, key, S_CALLS, IR_I(1), out);
		emit_array_add(ie, st, key, S_SIZES, IR_R(n), out);
		ir_label(ie, out);
		ir_exit(ie, IR_I(0));
	}
	ix = ir_new("k_exit");
	{
		int key = ir_stack_alloc(ix, 8, 8), out = ir_label_new(ix);
		ir_reg r = ir_vreg(ix);

		emit_only_tgid(ix, getpid(), out);
		is_int(probe_emit_ret(px, ix, r), 0, "%s: ret", mode);
		emit_array_add(ix, st, key, S_RETS, IR_R(r), out);
		ir_label(ix, out);
		ir_exit(ix, IR_I(0));
	}
	{
		struct bprog_opts o;
		struct bprog_diag d;

		probe_prog_opts(pe, &o);
		ge = bprog_load(ie, &o, &d);
		ok(ge != NULL, "%s: entry loads: %.200s", mode, ge ? "ok" : d.msg);
		bprog_diag_clear(&d);
		probe_prog_opts(px, &o);
		gx = bprog_load(ix, &o, &d);
		ok(gx != NULL, "%s: exit loads: %.200s", mode, gx ? "ok" : d.msg);
		bprog_diag_clear(&d);
	}
	if (!ge || !gx)
		goto out;
	ok(!probe_attach(pe, bprog_fd(ge)), "%s: entry attached: %.200s", mode,
	   probe_strerror(pe));
	ok(!probe_attach(px, bprog_fd(gx)), "%s: exit attached: %.200s", mode,
	   probe_strerror(px));
	fd = open("/dev/zero", O_RDONLY);
	for (int i = 0; i < K; i++)
		if (read(fd, buf, 1 + i % 64) < 0)
			break;
	close(fd);
	probe_detach(pe);
	probe_detach(px);
	{
		uint64_t want[S_N] = { K, 0, 0 }, v;

		for (int i = 0; i < K; i++)
			want[S_SIZES] += 1 + i % 64;
		want[S_RETS] = want[S_SIZES];
		for (uint32_t i = 0; i < S_N; i++) {
			v = 0;
			bmap_sum_u64(st, &i, 0, &v);
			is_u64(v, want[i], "%s: %s", mode, i == S_CALLS ? "K reads" :
			       i == S_SIZES ? "sum of arg(2)" : "sum of ret");
		}
	}
	ids[0] = bprog_id(ge);
	ids[1] = bprog_id(gx);
out:
	probe_free(pe);
	probe_free(px);
	bprog_free(ge);
	bprog_free(gx);
	for (int i = 0; i < 2; i++) {
		int f;

		if (!ids[i])
			continue;
		f = bpf_prog_get_fd_by_id(ids[i]);
		ok(f < 0 && errno == ENOENT, "%s: program %u gone", mode, ids[i]);
		if (f >= 0)
			close(f);
	}
	ir_free(ie);
	ir_free(ix);
	bmap_free(st);
}

int main(void)
{
	if (geteuid() != 0 && !bpf_have_privileges())
		skip_all("needs root or CAP_BPF+CAP_PERFMON to load BPF");
	count_reads(false);
	count_reads(true);
	return test_done();
}
