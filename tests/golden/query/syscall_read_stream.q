from r in syscall("read")
where r.comm == "cat" && r.ret > 0 && r.arg(0) == 3
let data = str(r.arg(1))
select { fd: r.arg(0), data: data, start: r.time, ns: r.duration }
limit 100
