from s in syscall("read") group s by s.comm into g select { c: g.key, p: s.pid }
