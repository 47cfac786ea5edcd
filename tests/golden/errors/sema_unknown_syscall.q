from s in syscall("reed") select count()
