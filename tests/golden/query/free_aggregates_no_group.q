from k in kernel.function("tcp_sendmsg")
select { calls: count(), bytes: sum(k.arg(2)), biggest: max(k.arg(2)), procs: distinct(k.comm) }
for 1m
