from s in syscall("read") select s.comm + 1
