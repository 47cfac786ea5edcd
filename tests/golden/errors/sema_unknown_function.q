from s in syscall("read") select median(s.ret)
