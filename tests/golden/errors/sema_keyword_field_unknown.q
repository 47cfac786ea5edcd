from s in syscall("read") select s.from
