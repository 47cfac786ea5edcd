// SPDX-License-Identifier: MIT
/* src/common/procstat.c: proc_start_ticks() names a process by its start
 * time: this one's from /proc/self and /proc/PID agree, a child whose
 * comm holds ") (" and spaces started no earlier and reads its own the
 * same as its parent does, and a child reaped is gone (-ENOENT). */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procstat.h"
#include "test.h"

int main(void)
{
	unsigned long long self = 0, byid = 0, child = 0, own = 0;
	int fds[2], st;
	pid_t pid;

	is_int(proc_start_ticks(0, &self), 0, "this process's start time");
	is_int(proc_start_ticks(getpid(), &byid), 0, "... by its pid");
	is_u64(byid, self, "... the same");
	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_NAME, "a) b (c ) 9 9");
		proc_start_ticks(0, &own);
		if (write(fds[1], &own, sizeof(own)) != sizeof(own))
			_exit(1);
		pause();
		_exit(0);
	}
	ok(read(fds[0], &own, sizeof(own)) == sizeof(own), "the child read its own");
	is_int(proc_start_ticks(pid, &child), 0, "a child named 'a) b (c ) 9 9'");
	is_u64(child, own, "... the parent reads what the child read");
	ok(child >= self, "... it started no earlier than its parent");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	is_int(proc_start_ticks(pid, &child), -ENOENT, "reaped: -ENOENT");
	return test_done();
}
