from io in cluster.function("libc:read")
where io.time < now + 5m
let size = io.arg(2)
group io by size / 1024 into g
select { sizeInKilobytes: g.key, countOfReadIOs: g.count() }
