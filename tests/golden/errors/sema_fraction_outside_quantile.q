from s in syscall("read") where s.pid > 0.5 select s.pid
