from s syscall("read") select s.pid
