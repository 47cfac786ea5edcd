from p in profile(99)
where p.pid != 0
group p by { comm: p.comm, cpu: p.cpu } into g
select { comm: g.comm, cpu: g.cpu, samples: g.count() }
order by samples desc
limit 5
window 5s
