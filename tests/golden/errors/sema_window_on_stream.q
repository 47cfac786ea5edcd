from s in syscall("read") select s.pid window 1s
