#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# pid_reuse.py PID PROG ARGS...: run PROG ARGS as a new process whose pid
# is PID (free: its process exited and was reaped), a child of this
# script and so of no process fay follows.  Root: the kernel's
# ns_last_pid (the last pid handed out in this pid namespace) is set to
# PID - 1 before each fork, until the child gets PID (another process's
# fork may take it first: tried again, up to 30 s).  Exits with PROG's
# status, 3 when PID could not be had; prints "pid PID" on stderr once
# it has it.
import os
import sys
import time

target = int(sys.argv[1])
argv = sys.argv[2:]
deadline = time.time() + 30
while time.time() < deadline:
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(target - 1))
    pid = os.fork()
    if pid == 0:
        if os.getpid() == target:
            os.execv(argv[0], argv)
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    if pid == target:
        print("pid", pid, file=sys.stderr)
        sys.exit(os.waitstatus_to_exitcode(st))
sys.exit(3)
