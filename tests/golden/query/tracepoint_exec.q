from e in tracepoint("sched:sched_process_exec")
select { pid: e.pid, file: e.filename, parent: e.old_pid }
