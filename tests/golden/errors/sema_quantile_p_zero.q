from s in syscall("read") select quantile(s.duration, 0)
