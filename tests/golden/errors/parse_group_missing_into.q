from s in syscall("read") group s by s.pid select count()
