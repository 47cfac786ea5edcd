from s in syscall("read") group x by s.pid into g select g.count()
