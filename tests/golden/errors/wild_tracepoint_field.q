from t in tracepoint("sched:sched_*") select { p: t.prev_pid }
