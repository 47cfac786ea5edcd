// SPDX-License-Identifier: MIT
/*
 * Which tasks a query speaks for (engine_opts.cgroup: fay agent --cgroup,
 * fay query --cgroup): only those in one cgroup v2 and below it.  An agent
 * for one tenant on a shared host, or one of several hosts simulated on
 * one kernel, sees its own processes and no one else's, from every
 * source: the programs compare the task's ancestor at the scope's level
 * (bpf_get_current_ancestor_cgroup_id()) with the scope's id, so a cgroup
 * made below the scope after the query attached is in it too (codegen.c,
 * cg_scope_filter).  Inline probes run in one process: it must be in the
 * scope when the query attaches, or the query is refused.  spans(...)
 * reads the spans the agent drains, which are not events of a task: the
 * scope does not filter them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/cgroup.h"
#include "engine/engine_int.h"

int engine_scope(struct engine *e)
{
	char why[512], path[4096];
	pid_t pid;
	int rc;

	if (!e->opts.cgroup || !e->opts.cgroup[0])
		return 0;
	rc = cgroup_scope_of(e->opts.cgroup, &e->scope_id, &e->scope_level, e->scope_path,
			     sizeof(e->scope_path), why, sizeof(why));
	if (rc)
		return engine_fail(e, rc, "--cgroup: %s", why);
	if (!engine_inl_active(e) || e->opts.emit_only)
		return 0;
	pid = engine_inl_pid(e, false);
	rc = cgroup_path_of_pid(pid, path, sizeof(path));
	if (rc)
		return engine_fail(e, rc, "--cgroup %s: the cgroup of process %d cannot be "
				   "read (/proc/%d/cgroup: %s)", e->scope_path, (int)pid,
				   (int)pid, strerror(-rc));
	if (!cgroup_path_under(path, e->scope_path))
		return engine_fail(e, -EPERM, "--cgroup %s: process %d is in cgroup %s, "
				   "outside it: not probed", e->scope_path, (int)pid, path);
	return 0;
}
