from s in syscall("read") select { p: s.pid, n: count() }
