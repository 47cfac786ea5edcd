# the system calls by name (s.name: raw_syscalls' number in the probe, named on read)
from s in syscall("*") where s.name != "clock_nanosleep" group s by { name: s.name, comm: s.comm } into g select { name: g.name, comm: g.comm, calls: g.count() } order by calls desc
