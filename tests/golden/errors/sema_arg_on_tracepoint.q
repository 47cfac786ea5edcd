from t in tracepoint("sched:sched_switch") select t.arg(0)
