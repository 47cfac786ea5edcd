from s in syscall("*") group s by s.comm into g select { comm: g.key, calls: g.count() } for 5s
