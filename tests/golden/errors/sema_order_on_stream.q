from s in syscall("read") select s.pid order by s.pid
