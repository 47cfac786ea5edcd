from s in syscall("read") select hist(s.ret) + 1
