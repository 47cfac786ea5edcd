from s in syscall("read") let a = s.pid let a = s.tid select a
