from r in syscall("read")
where r.ret > 0 && r.arg(0) != 0
select { bytes: hist(r.ret), p99_us: quantile(r.duration, 0.99) / 1000, procs: distinct(r.pid) }
window 1s
