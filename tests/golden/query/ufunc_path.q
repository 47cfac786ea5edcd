from m in function("/usr/bin/python3:PyObject_Malloc")
where m.arg(0) > 4096
group m by m.tid into g
select { tid: g.key, big_allocs: g.count(), mean_ns: g.avg(m.duration) }
