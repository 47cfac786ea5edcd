from s in syscall("read") where s.name == "write" select { n: count() }
