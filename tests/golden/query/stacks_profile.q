// user stacks of on-CPU samples, 16 frames, by command (issue #27)
from s in profile(499)
group s by { comm: s.comm, stack: s.ustack(16) } into g
select { comm: g.comm, stack: g.stack, samples: g.count() }
