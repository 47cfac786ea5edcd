from f in function("libc:malloc") where f.unwound group f by f.arg(0) into g select { size: g.key, n: g.count(), u: g.sum(f.unwound), d: g.max(f.duration) }
