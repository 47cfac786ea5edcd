from s in syscall("read") where s.comm < "bash" select s.pid
