from s in syscall("read") where s.comm select s.pid
