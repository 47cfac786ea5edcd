from sp in spans("mapperd") group sp by sp.name into g select { name: g.key, avg_us: g.avg(sp.duration) / 1000 }
