from s in syscall("read")
where s.kstack == "x"
select { n: count() }
