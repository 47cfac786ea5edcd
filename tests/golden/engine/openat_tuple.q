from o in syscall("openat")
let mode = o.arg(2) & 3
where !(o.pid == 1) || mode == 2
group o by { pid: o.pid, mode: mode, file: str(o.arg(1)) } into g
select { pid: g.pid, file: g.file, n: g.count(), fl: g.lhist(o.arg(2) % 4096 / -3, -100, 100, 25), lo: g.min(o.arg(3)), hi: g.max(o.arg(3)), avg: g.avg(o.arg(2) >> 1) }
order by n desc limit 10
