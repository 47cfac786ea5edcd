from s in syscall("read") where s.comm == "ba\qsh" select s.pid
