from s in syscall("read") select s.ret / (2 - 2)
