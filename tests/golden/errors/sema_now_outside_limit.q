from s in syscall("read") where s.pid < now select s.pid
