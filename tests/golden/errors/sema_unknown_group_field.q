from s in syscall("read") group s by { p: s.pid } into g select { p: g.q, n: g.count() }
