from s in syscall("read") where s.pid == 99999999999999999999 select s.pid
