from o in syscall("openat")
let path = str(o.arg(1))
group o by path into g
select { path: g.key, opens: g.count() }
order by g.count() desc
limit 20
for 30s
