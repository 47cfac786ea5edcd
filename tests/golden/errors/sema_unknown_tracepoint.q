from t in tracepoint("sched:no_such_event") select count()
