from t in tracepoint("sched:sched_switch") select t.ret
