from s in syscall("read") select sum(count())
