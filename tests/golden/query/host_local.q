// the host field on this host: a column, a group key, a filter
from s in syscall("openat")
where s.host != "db1" && s.comm == "cat"
group s by { h: s.host, c: s.comm } into g
select { host: g.h, comm: g.c, n: g.count(), hosts: g.distinct(s.host) }
