from s in syscall("read") select quantile(s.duration, 1.5)
