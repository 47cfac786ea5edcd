from s in syscall("read") select { pid s.pid }
