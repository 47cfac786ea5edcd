from s in syscall("read") where s.host == 1 select count()
