from s in syscall("read") group s by s.pid into g select s.count()
