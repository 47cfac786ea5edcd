from s in syscall("read") select count() for 5q
