from s in syscall("read") select count() window 5
