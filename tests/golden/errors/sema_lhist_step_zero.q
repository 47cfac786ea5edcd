from s in syscall("read") select lhist(s.ret, 0, 100, 0)
