from s in syscall("read") select count() for 1.5s
