// SPDX-License-Identifier: MIT
/* src/common/cgroup.c: the container a cgroup path names, as systemd-
 * nspawn/machined, podman, Docker and the CRI runtimes name their
 * cgroups (systemd and cgroupfs drivers), the innermost match winning,
 * "" for the host's cgroups; and this process's own cgroup id is the one
 * its path in the cgroup2 file system has. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "test.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char *ctr(const char *path)
{
	static char out[64];

	cgroup_container(path, out, sizeof(out));
	return out;
}

static int self_cb(uint64_t id, const char *path, void *arg)
{
	(void)path;
	return id == *(uint64_t *)arg;
}

int main(void)
{
	uint64_t me, id;
	char path[4096], canon[4096], why[512], mine[4096];
	int level;

	is_str(ctr("/machine.slice/machine-web\\x2d1.scope"), "web-1", "machined: machine-NAME.scope, unescaped");
	is_str(ctr("/machine.slice/machine-db.scope/payload"), "db", "... a cgroup below it");
	is_str(ctr("/machine.slice/libpod-" ID ".scope"), "0123456789ab", "podman (systemd): libpod-ID.scope");
	is_str(ctr("/machine.slice/libpod-" ID ".scope/container"), "0123456789ab", "... its container/ below");
	is_str(ctr("/libpod_parent/libpod-" ID), "0123456789ab", "podman (cgroupfs)");
	is_str(ctr("/system.slice/docker-" ID ".scope"), "0123456789ab", "docker (systemd)");
	is_str(ctr("/docker/" ID), "0123456789ab", "docker (cgroupfs)");
	is_str(ctr("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-" ID ".scope"),
	       "0123456789ab", "kubepods (systemd): cri-containerd-ID.scope");
	is_str(ctr("/kubepods/burstable/pod1234-5678/" ID), "0123456789ab", "kubepods (cgroupfs)");
	is_str(ctr("/kubepods.slice/crio-" ID ".scope"), "0123456789ab", "crio-ID.scope");
	is_str(ctr("/"), "", "the root: the host");
	is_str(ctr("/system.slice/ssh.service"), "", "a service: the host");
	is_str(ctr("/user.slice/user-0.slice/session-1.scope"), "", "a session scope: the host");
	is_str(ctr("/machine.slice/libpod-abc.scope"), "", "libpod- with a short id: no container");
	is_str(ctr("/other/" ID), "", "a bare id under an unknown parent: no container");
	ok(cgroup_path_under("/a/b", "/a"), "/a/b is under /a");
	ok(cgroup_path_under("/a", "/a"), "/a is under itself");
	ok(!cgroup_path_under("/ab", "/a"), "/ab is not under /a");
	ok(!cgroup_path_under("/", "/a"), "the root is not under /a");
	ok(cgroup_path_under("/x/y", "/"), "everything is under the root");
	me = cgroup_id_of_pid(getpid());
	if (!cgroup2_root() || !me) {
		diag("no cgroup2 file system here: the id checks are not made");
		return test_done();
	}
	is_int(cgroup_foreach(self_cb, &me), 1, "this process's cgroup id is a cgroup's in the walk");
	is_int(cgroup_path_of(me, path, sizeof(path)), 0, "... and has a path");
	ok(path[0] == '/', "... under the root (%.200s)", path);
	is_int(cgroup_path_of(~0ull, path, sizeof(path)), -ENOENT, "an id no cgroup has: -ENOENT");
	is_int(cgroup_path_of_pid(getpid(), mine, sizeof(mine)), 0, "this process's cgroup path");
	is_str(mine, path, "... the one its id walks to");
	is_int(cgroup_scope_of(mine, &id, &level, canon, sizeof(canon), why, sizeof(why)), 0,
	       "a scope of this process's cgroup (%.200s)", why);
	ok(id == me, "... has its id");
	is_str(canon, mine, "... spelt the same");
	is_int(cgroup_scope_of("//", &id, &level, canon, sizeof(canon), why, sizeof(why)), 0,
	       "\"//\": the root");
	is_str(canon, "/", "... spelt \"/\"");
	is_int(level, 0, "... at level 0");
	is_int(cgroup_scope_of("/fay-test-no-such/cg/", &id, &level, canon, sizeof(canon), why,
			       sizeof(why)), -ENOENT, "a cgroup that does not exist: -ENOENT");
	ok(strstr(why, "no such cgroup") && strstr(why, "/fay-test-no-such/cg"),
	   "... naming it (%.200s)", why);
	is_int(cgroup_scope_of("/a/../b", &id, &level, canon, sizeof(canon), why, sizeof(why)),
	       -EINVAL, "\"..\" is refused");
	ok(strstr(why, "\"..\"") != NULL, "... saying so (%.200s)", why);
	return test_done();
}
