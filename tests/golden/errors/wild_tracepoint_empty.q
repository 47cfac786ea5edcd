from t in tracepoint("sched:nothing_*") select count()
