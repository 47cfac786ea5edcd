// SPDX-License-Identifier: MIT
/*
 * The helpers a VM program may call, with the argument types the verifier
 * checks.  Each runs in the traced thread: nothing here may fault, block
 * for long or allocate.  Reads of user memory go through
 * process_vm_readv() on this process, which returns EFAULT for an
 * unmapped address instead of raising SIGSEGV.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vm/vm_int.h"

#define H(name) static uint64_t h_##name(uint64_t a1, uint64_t a2, uint64_t a3, \
					 uint64_t a4, uint64_t a5,		\
					 const struct vm_env *env)

H(map_lookup_elem)
{
	return (uint64_t)(uintptr_t)vm_map_lookup((struct vm_map *)(uintptr_t)a1,
						  (const void *)(uintptr_t)a2, env->slot);
}

H(map_update_elem)
{
	return (uint64_t)(int64_t)vm_map_update((struct vm_map *)(uintptr_t)a1,
						(const void *)(uintptr_t)a2,
						(const void *)(uintptr_t)a3, a4, env->slot);
}

H(map_delete_elem)
{
	return (uint64_t)(int64_t)vm_map_delete((struct vm_map *)(uintptr_t)a1,
						(const void *)(uintptr_t)a2);
}

H(ktime_get_ns)
{
	struct timespec ts;

	if (env->now)
		return env->now(env);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

H(get_current_pid_tgid)
{
	return env->pid_tgid;
}

H(get_current_cgroup_id)
{
	return env->cgroup_id;
}

H(get_current_uid_gid)
{
	return env->uid_gid;
}

H(get_smp_processor_id)
{
	return env->cpu;
}

H(get_current_comm)
{
	uint64_t n = a2 < sizeof(env->comm) ? a2 : sizeof(env->comm);

	memset((void *)(uintptr_t)a1, 0, a2);
	memcpy((void *)(uintptr_t)a1, env->comm, n);
	if (a2)
		((char *)(uintptr_t)a1)[a2 - 1] = 0;
	return 0;
}

/* Read n bytes at src into dst without faulting: 0 or -EFAULT. */
static int64_t read_user(void *dst, uint64_t src, uint64_t n)
{
	struct iovec l = { dst, n }, r = { (void *)(uintptr_t)src, n };

	if (n == 0)
		return 0;
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n)
		return 0;
	return -EFAULT;
}

H(probe_read_user)
{
	int64_t rc = read_user((void *)(uintptr_t)a1, a3, a2);

	if (rc)
		memset((void *)(uintptr_t)a1, 0, a2);
	return (uint64_t)rc;
}

/* Like the kernel's: copies up to n - 1 bytes and a NUL, stops at the
 * first NUL; returns the length with the NUL, or -EFAULT (dst zeroed)
 * when the first byte cannot be read.  Reads page by page so that a
 * string ending just before an unmapped page is read whole. */
H(probe_read_user_str)
{
	char *dst = (char *)(uintptr_t)a1;
	uint64_t n = a2, src = a3, got = 0;

	if (n == 0)
		return (uint64_t)-EINVAL;
	while (got < n - 1) {
		uint64_t page_left = 4096 - ((src + got) & 4095);
		uint64_t want = n - 1 - got < page_left ? n - 1 - got : page_left;
		char *nul;

		if (read_user(dst + got, src + got, want)) {
			if (got == 0) {
				memset(dst, 0, n);
				return (uint64_t)-EFAULT;
			}
			break;
		}
		nul = memchr(dst + got, 0, want);
		if (nul)
			return (uint64_t)(nul - dst + 1);
		got += want;
	}
	dst[got] = 0;
	return got + 1;
}

/* No kernel memory in user space: what a kernel address reads as. */
H(probe_read_kernel)
{
	memset((void *)(uintptr_t)a1, 0, a2);
	return (uint64_t)-EFAULT;
}

H(ringbuf_output)
{
	return (uint64_t)(int64_t)vm_ring_output((struct vm_map *)(uintptr_t)a1,
						 env->slot, (const void *)(uintptr_t)a2, a3);
}

H(fay_span)
{
	memset((void *)(uintptr_t)a1, 0, a2);
	if (!env->span || a3 > VM_SPAN_NAME)
		return (uint64_t)-ENOENT;
	return (uint64_t)(int64_t)env->span(env, (int)a3, (void *)(uintptr_t)a1, (uint32_t)a2);
}

static const struct vm_helper fay_span_helper = {
	"fay_span", h_fay_span, { VA_UNINIT_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, 0
};

H(fay_depth)
{
	return env->depth;
}

static const struct vm_helper fay_depth_helper = {
	"fay_depth", h_fay_depth, { 0 }, VR_SCALAR, 0
};

H(fay_unwound)
{
	return env->unwound;
}

static const struct vm_helper fay_unwound_helper = {
	"fay_unwound", h_fay_unwound, { 0 }, VR_SCALAR, 0
};

H(fay_cookie)
{
	return env->cookie;
}

static const struct vm_helper fay_cookie_helper = {
	"fay_cookie", h_fay_cookie, { 0 }, VR_SCALAR, 0
};

H(fay_vpid)
{
	return env->vpid;
}

static const struct vm_helper fay_vpid_helper = {
	"fay_vpid", h_fay_vpid, { 0 }, VR_SCALAR, 0
};

/* get_stackid(ctx, map, flags): a user stack (BPF_F_USER_STACK) from
 * the caller's walker, interned in the stack map: its id, -EFAULT (no
 * walker, no frame; a kernel stack: none in user space), -ENOSPC (the
 * map is full). */
H(get_stackid)
{
	uint64_t ips[127];
	struct vm_map *m = (struct vm_map *)(uintptr_t)a2;
	uint32_t max = vm_map_def(m)->value_size / 8, n;

	(void)a4;
	(void)a5;
	if (!(a3 & BPF_F_USER_STACK) || !env->ustack)
		return (uint64_t)(int64_t)-EFAULT;
	n = env->ustack(env, (const void *)(uintptr_t)a1, ips, max < 127 ? max : 127);
	if (!n)
		return (uint64_t)(int64_t)-EFAULT;
	return (uint64_t)vm_stack_intern(m, ips, n);
}

static const struct vm_helper helpers[] = {
	[BPF_FUNC_map_lookup_elem] = { "map_lookup_elem", h_map_lookup_elem,
		{ VA_MAP, VA_KEY }, VR_MAP_VALUE_OR_NULL, 0 },
	[BPF_FUNC_map_update_elem] = { "map_update_elem", h_map_update_elem,
		{ VA_MAP, VA_KEY, VA_VALUE, VA_ANY }, VR_SCALAR, 0 },
	[BPF_FUNC_map_delete_elem] = { "map_delete_elem", h_map_delete_elem,
		{ VA_MAP, VA_KEY }, VR_SCALAR, 0 },
	[BPF_FUNC_ktime_get_ns] = { "ktime_get_ns", h_ktime_get_ns, { 0 }, VR_SCALAR, 0 },
	[BPF_FUNC_get_current_pid_tgid] = { "get_current_pid_tgid",
		h_get_current_pid_tgid, { 0 }, VR_SCALAR, 0 },
	[BPF_FUNC_get_current_cgroup_id] = { "get_current_cgroup_id",
		h_get_current_cgroup_id, { 0 }, VR_SCALAR, 0 },
	[BPF_FUNC_get_current_uid_gid] = { "get_current_uid_gid",
		h_get_current_uid_gid, { 0 }, VR_SCALAR, 0 },
	[BPF_FUNC_get_smp_processor_id] = { "get_smp_processor_id",
		h_get_smp_processor_id, { 0 }, VR_SCALAR, 0 },
	[BPF_FUNC_get_current_comm] = { "get_current_comm", h_get_current_comm,
		{ VA_UNINIT_MEM, VA_SIZE }, VR_SCALAR, 0 },
	[BPF_FUNC_probe_read_user] = { "probe_read_user", h_probe_read_user,
		{ VA_UNINIT_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, 0 },
	[BPF_FUNC_probe_read_user_str] = { "probe_read_user_str", h_probe_read_user_str,
		{ VA_UNINIT_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, 0 },
	[BPF_FUNC_probe_read_kernel] = { "probe_read_kernel", h_probe_read_kernel,
		{ VA_UNINIT_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, 0 },
	[BPF_FUNC_probe_read_kernel_str] = { "probe_read_kernel_str", h_probe_read_kernel,
		{ VA_UNINIT_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, 0 },
	[BPF_FUNC_ringbuf_output] = { "ringbuf_output", h_ringbuf_output,
		{ VA_MAP, VA_MEM, VA_SIZE, VA_ANY }, VR_SCALAR, -1 },
	[BPF_FUNC_get_stackid] = { "get_stackid", h_get_stackid,
		{ VA_CTX, VA_MAP, VA_ANY }, VR_SCALAR, BPF_MAP_TYPE_STACK_TRACE },
};

const struct vm_helper *vm_helper(int id)
{
	if (id == VM_FUNC_fay_span)
		return &fay_span_helper;
	if (id == VM_FUNC_fay_depth)
		return &fay_depth_helper;
	if (id == VM_FUNC_fay_unwound)
		return &fay_unwound_helper;
	if (id == VM_FUNC_fay_cookie)
		return &fay_cookie_helper;
	if (id == VM_FUNC_fay_vpid)
		return &fay_vpid_helper;
	if (id < 0 || (size_t)id >= sizeof(helpers) / sizeof(helpers[0]) || !helpers[id].fn)
		return NULL;
	return &helpers[id];
}
