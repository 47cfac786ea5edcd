from e in tracepoint("sched:sched_process_exec")
where e.comm != "sh"
select { pid: e.pid, file: e.filename, comm: e.comm }
