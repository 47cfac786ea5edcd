from s in syscall("read") select lhist(s.ret, 0, 1000000, 1)
