from s in syscall("read") select { u: sum(s.unwound) }
