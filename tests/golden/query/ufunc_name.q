from f in function("libc:malloc") group f by f.name into g select { f: g.key, n: g.count() }
