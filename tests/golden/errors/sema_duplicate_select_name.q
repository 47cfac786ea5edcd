from s in syscall("read") group s by s.pid into g select { n: g.key, n: g.count() }
