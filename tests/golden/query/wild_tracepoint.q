from t in tracepoint("sched:sched_*") where t.name == "sched_switch" group t by t.name into g select { ev: g.key, n: g.count() }
