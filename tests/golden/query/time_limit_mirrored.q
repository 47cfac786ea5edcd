from s in syscall("read")
where now + 10s > s.time && s.pid == 1
select { n: count() }
