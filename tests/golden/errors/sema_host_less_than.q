from s in syscall("read") where s.host < "m" select count()
