/* SPDX-License-Identifier: MIT */
/*
 * Control groups and the containers they name (issue #25 item 4).  A
 * BPF program reads bpf_get_current_cgroup_id(): the cgroup v2 id of the
 * task, which is the inode number of its directory in the cgroup2 file
 * system.  These turn such an id into its path ("/machine.slice/
 * machine-web.scope") and into the container the path names, as the
 * runtimes name their cgroups:
 *
 *   systemd-nspawn, machined   machine-NAME.scope          NAME
 *   podman (libpod)            libpod-ID.scope, libpod/ID  ID's first 12
 *   docker                     docker-ID.scope, docker/ID  ID's first 12
 *   CRI (kubepods)             cri-containerd-ID.scope, crio-ID.scope,
 *                              kubepods/.../pod.../ID      ID's first 12
 *
 * (the innermost component that matches wins); "" for any other cgroup
 * (the host's processes).
 */
#ifndef FAY_COMMON_CGROUP_H
#define FAY_COMMON_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the cgroup2 file system is mounted (/sys/fs/cgroup, or
 * /sys/fs/cgroup/unified on a hybrid system); NULL when it is not. */
const char *cgroup2_root(void);

/* The path (relative to the cgroup2 root, "/" for the root) of cgroup
 * id into path.  0, or -ENOENT (no such cgroup: gone, or no cgroup2).
 * Walks the hierarchy (a few hundred directories) at each call. */
int cgroup_path_of(uint64_t id, char *path, size_t len);

/* The container a cgroup path names (table above), "" if none. */
void cgroup_container(const char *path, char *out, size_t len);

/* v (a path or a container) into out, size bytes, zero-filled after it: a
 * v of size bytes or more keeps its end after "..." (the end of a long
 * path says most: "...kubepods/.../cri-containerd-ID.scope"), so out is
 * always NUL-terminated.  How s.cgroup is shown in every source. */
void cgroup_str_cut(char *out, size_t size, const char *v);

#define CGROUP_ID_LEN 64
/* The same, and the whole 64-digit id into id when the runtime names its
 * cgroup by id (podman, docker, CRI); id is "" for a name (machined) or
 * no container.  OpenTelemetry's container.id is that id; its
 * container.name is out when id is "". */
void cgroup_container_id(const char *path, char *out, size_t len,
			 char id[CGROUP_ID_LEN + 1]);

/* The cgroup v2 id of process pid (its "0::" line of /proc/PID/cgroup),
 * or 0 when it has none or cannot be read. */
uint64_t cgroup_id_of_pid(pid_t pid);

/* The cgroup v2 path of process pid (its "0::" line of /proc/PID/cgroup,
 * "/" for the root) into path.  0, or -errno (-ENOENT: no such process or
 * no cgroup v2 line). */
int cgroup_path_of_pid(pid_t pid, char *path, size_t len);

/* A cgroup named by its path under the cgroup2 root ("/tenant-a",
 * "/machine.slice/machine-web.scope"; a leading '/' may be left out,
 * "/" is the root), as fay agent --cgroup and fay query --cgroup take it:
 * its id (the directory's inode) and its level (0 for the root, 1 for
 * "/a", 2 for "/a/b": what bpf_get_current_ancestor_cgroup_id() takes),
 * and the path spelt canonically ("/a/b", no '/' at the end) into canon.
 * 0, or -errno with why (whylen bytes) saying what is wrong. */
int cgroup_scope_of(const char *path, uint64_t *id, int *level, char *canon, size_t clen,
		    char *why, size_t whylen);

/* Whether cgroup path p is scope or below it (both canonical paths). */
int cgroup_path_under(const char *p, const char *scope);

/* Call cb with every cgroup's id and path (the root's first); stops at
 * the first non-zero cb return and returns it.  0, or -ENOENT (no
 * cgroup2). */
int cgroup_foreach(int (*cb)(uint64_t id, const char *path, void *arg), void *arg);

#endif
