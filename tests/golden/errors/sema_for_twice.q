from s in syscall("read") where s.time < now + 5m select count() for 1m
