from t in tracepoint("sched:sched_switch") select t.prev_cpu
