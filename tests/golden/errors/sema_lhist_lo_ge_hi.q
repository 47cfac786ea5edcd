from s in syscall("read") select lhist(s.ret, 100, 10, 5)
