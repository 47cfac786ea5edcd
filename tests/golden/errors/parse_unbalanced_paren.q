from s in syscall("read") where (s.pid == 1 select s.pid
