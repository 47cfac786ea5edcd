from s in syscall("read")
group s by s.comm into g
select { comm: g.key, calls: g.count() }
