from s in syscall("read") group by s.pid into g select g.count()
