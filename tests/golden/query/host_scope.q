from s in host("db1").syscall("fsync")
group s by s.host into g
select { host: g.key, p99: g.quantile(s.duration, 0.99) }
