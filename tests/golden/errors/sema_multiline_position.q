from s in syscall("read")
let size = s.arg(2)
group s by size / 1024 into g
select {
	sizeKB: g.key,
	count: g.count(),
	bad: g.sum(s.comm)
}
