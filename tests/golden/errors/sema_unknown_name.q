from s in syscall("read") where size > 10 select s.pid
