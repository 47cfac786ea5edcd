from s in syscall("read") where s.pid == "bash" select s.pid
