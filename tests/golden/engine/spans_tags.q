from sp in spans("blockstack")
where sp.tag("object") != "" && sp.kind == "server" && !sp.error
group sp by {svc: sp.service, name: sp.name} into g
select { svc: g.svc, name: g.name, n: g.count(), avg_us: g.avg(sp.duration) / 1000, size: g.max(sp.pid) }
