from p in profile(99)
group p by p.cpu into g
select { cpu: g.key, samples: g.count() }
