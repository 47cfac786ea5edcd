from s in syscall("read") select s.arg(9)
