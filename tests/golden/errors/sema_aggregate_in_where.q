from s in syscall("read") where count() > 5 select count()
