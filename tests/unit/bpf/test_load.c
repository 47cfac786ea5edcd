// SPDX-License-Identifier: MIT
/*
 * Loading generated programs into the kernel: the spill program passes
 * the verifier and computes the right values when run; a rejected program
 * is reported at the source position of the failing IR instruction; a
 * freed program is gone from the kernel.
 */
#include <errno.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "test.h"
#include "progs.h"

static void test_spill_runs(void)
{
	struct bmap *arr = bmap_new("spill_arr", BPF_MAP_TYPE_ARRAY, 4, 8, SPILL_N);
	struct ir *ir = prog_spill(arr);
	struct bprog_opts o = { .sz = sizeof(o), .type = BPF_PROG_TYPE_SOCKET_FILTER };
	struct bprog_diag d;
	struct bprog *p = bprog_load(ir, &o, &d);
	unsigned char pkt[64] = { 0 };
	uint64_t want = 0;
	uint32_t ret = 0;
	int bad = 0;

	ok(p != NULL, "spill program passes the verifier: %.200s", p ? "yes" : d.msg);
	ok(ir_nspilled(ir) > 0, "it really spills (%u values)", ir_nspilled(ir));
	if (!p)
		goto out;
	is_int(bprog_test_run(p, pkt, sizeof(pkt), &ret), 0, "test run");
	for (int i = 0; i < SPILL_N; i++)
		want += spill_value(i);
	is_u64(ret, (uint32_t)want, "sum of %d spilled values comes back", SPILL_N);
	for (uint32_t i = 0; i < SPILL_N; i++) {
		uint64_t v = 0;

		if (bmap_lookup(arr, &i, &v) || v != spill_value(i))
			bad++;
	}
	is_int(bad, 0, "each spilled value reached its map slot");
out:
	bprog_diag_clear(&d);
	bprog_free(p);
	ir_free(ir);
	bmap_free(arr);
}

static void test_rejection_maps_back(void)
{
	struct bmap *m = bmap_new("rej", BPF_MAP_TYPE_HASH, 8, 8, 4);
	struct ir *ir = ir_new("reject");
	struct bprog_opts o = { .sz = sizeof(o), .type = BPF_PROG_TYPE_SOCKET_FILTER };
	struct bprog_diag d;
	struct bprog *p;
	int k = ir_stack_alloc(ir, 8, 8);
	ir_reg v = ir_vreg(ir), x = ir_vreg(ir);

	ir_set_pos(ir, 2, 3);
	ir_store(ir, IR_S(k), 0, 8, IR_I(1));
	ir_call(ir, v, BPF_FUNC_map_lookup_elem, 2, IR_M(m), IR_S(k));
	ir_set_pos(ir, 3, 7);
	ir_load(ir, x, IR_R(v), 0, 8, 0);	/* no NULL check */
	ir_set_pos(ir, 4, 1);
	ir_exit(ir, IR_R(x));
	p = bprog_load(ir, &o, &d);
	ok(p == NULL, "the verifier rejects a load through a maybe-NULL pointer");
	ok(d.line == 3 && d.col == 7, "rejection mapped to 3:7 (got %u:%u)",
	   d.line, d.col);
	ok(d.insn >= 0 && d.ir_insn >= 0, "failing insn %d, IR %d", d.insn, d.ir_insn);
	ok(!strncmp(d.msg, "3:7: ", 5) && strstr(d.msg, "map_value_or_null"),
	   "short message: %.200s", d.msg);
	ok(d.log && strlen(d.log) > strlen(d.msg),
	   "full verifier log available on request");
	ok(strlen(d.msg) < 200, "message is short (%zu chars)", strlen(d.msg));
	bprog_diag_clear(&d);
	bprog_free(p);
	ir_free(ir);
	bmap_free(m);
}

static void test_free_unloads(void)
{
	struct ir *ir = ir_new("gone");
	struct bprog_opts o = { .sz = sizeof(o), .type = BPF_PROG_TYPE_SOCKET_FILTER,
				.keep_log = true };
	struct bprog *p;
	uint32_t id;
	int fd;

	ir_exit(ir, IR_I(0));
	p = bprog_load(ir, &o, NULL);
	ok(p && bprog_id(p) > 0, "loaded with an id");
	if (!p)
		return;
	ok(bprog_log(p) && strstr(bprog_log(p), "processed"), "log kept on request");
	id = bprog_id(p);
	fd = bpf_prog_get_fd_by_id(id);
	ok(fd >= 0, "id %u is in the kernel", id);
	if (fd >= 0)
		close(fd);
	bprog_free(p);
	ir_free(ir);
	fd = bpf_prog_get_fd_by_id(id);
	ok(fd < 0 && errno == ENOENT, "after bprog_free id %u is gone", id);
	if (fd >= 0)
		close(fd);
}

static void test_maps(void)
{
	struct bmap *m = bmap_new("pc", BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 4);
	size_t sz = bmap_value_buf_size(m);
	uint64_t key = 7, sum = 0, *vals = calloc(1, sz);
	int n = bpf_ncpus();

	ok(bmap_new("x", BPF_MAP_TYPE_RINGBUF, 4, 4, 4) == NULL && errno == EINVAL,
	   "unsupported map type refused");
	ok(bmap_new("x", BPF_MAP_TYPE_HASH, 4, 4, 0) == NULL && errno == EINVAL,
	   "unbounded map refused");
	is_int(bmap_create(m), 0, "per-CPU hash created");
	for (int c = 0; c < n; c++)
		vals[c] = (uint64_t)c + 1;
	is_int(bmap_update(m, &key, vals, BPF_ANY), 0, "update all CPUs");
	is_int(bmap_sum_u64(m, &key, 0, &sum), 0, "sum");
	is_u64(sum, (uint64_t)n * (n + 1) / 2, "sum over %d CPUs", n);
	key = 8;
	is_int(bmap_sum_u64(m, &key, 0, &sum), -ENOENT, "missing key");
	free(vals);
	bmap_free(m);
}

int main(void)
{
	if (geteuid() != 0 && !bpf_have_privileges())
		skip_all("needs root or CAP_BPF+CAP_PERFMON to load BPF");
	test_maps();
	test_spill_runs();
	test_rejection_maps_back();
	test_free_unloads();
	return test_done();
}
