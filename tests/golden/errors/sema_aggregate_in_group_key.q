from s in syscall("read") group s by sum(s.ret) into g select g.count()
