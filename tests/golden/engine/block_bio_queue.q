# rwbs: char[10] at offset 28 (4 mod 8); comm: char[16] at 38 (6 mod 8).
from t in tracepoint("block:block_bio_queue")
where t.rwbs != "R"
group t by { rwbs: t.rwbs, comm: t.comm } into g
select { rwbs: g.rwbs, comm: g.comm, n: g.count(), sectors: g.sum(t.nr_sector) }
