from s in syscall("read") where s.pid @ 3 select s.pid
