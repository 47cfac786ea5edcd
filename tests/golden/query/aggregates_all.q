from w in syscall("write")
where w.ret >= 0
group w by w.pid into g
select {
  pid: g.key,
  n: g.count(),
  bytes: g.sum(w.ret),
  smallest: g.min(w.ret),
  largest: g.max(w.ret),
  mean: g.avg(w.ret),
  sizes: g.hist(w.ret),
  lat: g.lhist(w.duration / 1000, 0, 1000, 50),
  p50: g.quantile(w.duration, 0.5),
  p999: quantile(w.duration, 0.999),
  fds: g.distinct(w.arg(0))
}
window 1s
