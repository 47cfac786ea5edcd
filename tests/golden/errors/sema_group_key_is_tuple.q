from s in syscall("read") group s by { p: s.pid, c: s.comm } into g select { k: g.key }
