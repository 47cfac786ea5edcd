from s in syscall("read") select lhist(s.ret, 0, s.pid, 5)
