// SPDX-License-Identifier: MIT
/*
 * Whose processes a query may probe (#10).  A query asked by a non-root
 * user (engine_opts_requester()) sees that user's processes only: every
 * program drops events whose task has another real uid (codegen.c, cg_uid_filter), and
 * a user-space probe is refused before anything is loaded unless
 *   - it is scoped to one process (process(PID), -p, -c) of that user:
 *     every uid of the process (real, effective, saved, fs) is the
 *     requester's, as ptrace's same-user rule asks; or
 *   - it is process-wide (function("BIN:SYM"), usdt("BIN:...")) on a
 *     binary the requester owns; it fires in whoever runs the binary,
 *     and the uid filter keeps the requester's events alone.
 * A process-wide probe of a binary the user does not own (libc, a
 * system program) is refused with the ways to scope it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/peer.h"
#include "common/procstat.h"
#include "engine/engine_int.h"

void engine_opts_requester(struct engine_opts *o, bool allow_other_users)
{
	o->uid = getuid();
	o->own_uid_only = o->uid != 0 && !allow_other_users;
}

/* The uids of process pid (real, effective, saved, fs) from its status
 * file.  0, -ESRCH (gone) or -EIO (unreadable line). */
static int proc_uids(pid_t pid, unsigned uids[4])
{
	unsigned long long v[4];
	int n = proc_status_nums(pid, "Uid", v, 4);

	if (n < 0)
		return -ESRCH;
	for (int i = 0; i < n; i++)
		uids[i] = (unsigned)v[i];
	return n == 4 ? 0 : -EIO;
}

static const char *what(const struct eprog *ep)
{
	return ep->kind == PROBE_USDT ? "usdt" : "function";
}

int engine_check_pid(struct engine *e, const struct eprog *ep, const char *name)
{
	char me[160], them[160];
	unsigned uids[4];
	pid_t pid = ep->popts.pid;
	int err;

	if (!e->opts.own_uid_only || e->opts.emit_only || pid <= 0)
		return 0;
	err = proc_uids(pid, uids);
	if (err == -ESRCH)
		return engine_fail(e, err, "process %d: no such process", (int)pid);
	if (err)
		return engine_fail(e, err, "process %d: cannot read its uids from "
				   "/proc/%d/status", (int)pid, (int)pid);
	for (int i = 0; i < 4; i++)
		if (uids[i] != e->opts.uid)
			return engine_fail(e, -EPERM, "%s(\"%s\") in process %d: the "
					   "process belongs to %s, and the query is asked by %s: "
					   "a non-root user probes only its own processes "
					   "(--allow-other-users lifts this)", what(ep), name,
					   (int)pid, peer_uid_name(uids[i], them, sizeof(them)),
					   peer_uid_name(e->opts.uid, me, sizeof(me)));
	return 0;
}

static int check_binary(struct engine *e, const struct eprog *ep)
{
	const char *bin = probe_binary(ep->probe);
	char me[160], them[160];
	struct stat st;

	if (!bin)
		return engine_fail(e, -EINVAL, "%s(\"%s\"): no binary resolved", what(ep),
				   ep->spec);
	if (stat(bin, &st))
		return engine_fail(e, -errno, "%s(\"%s\"): %s: %s", what(ep), ep->spec, bin,
				   strerror(errno));
	if (st.st_uid == e->opts.uid)
		return 0;
	return engine_fail(e, -EPERM, "%s(\"%s\") in every process: %s belongs to %s, "
			   "and the query is asked by %s: a non-root user probes only "
			   "its own processes; name one with process(PID), -p PID or "
			   "-c CMD (or --allow-other-users)", what(ep), ep->spec, bin,
			   peer_uid_name(st.st_uid, them, sizeof(them)),
			   peer_uid_name(e->opts.uid, me, sizeof(me)));
}

int engine_check_owners(struct engine *e)
{
	if (!e->opts.own_uid_only || e->opts.emit_only)
		return 0;
	for (int i = 0; i < e->nprogs; i++) {
		const struct eprog *ep = &e->progs[i];
		int err;

		if (ep->kind != PROBE_UPROBE && ep->kind != PROBE_URETPROBE &&
		    ep->kind != PROBE_USDT)
			continue;
		if (!ep->probe)		/* spans: no probe */
			continue;
		if (ep->popts.pid > 0)	/* engine_check_pid() at set-up */
			continue;
		err = check_binary(e, ep);
		if (err)
			return err;
	}
	return 0;
}
