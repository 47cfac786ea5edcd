from r in tracepoint("block:block_rq_complete")
where r.error == 0
group r by r.rwbs into g
select { op: g.key, sectors: lhist(r.nr_sector, 0, 256, 8), total: g.sum(r.nr_sector * 512) }
window 10s
