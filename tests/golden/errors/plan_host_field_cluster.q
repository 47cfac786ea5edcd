from s in cluster.syscall("read") select s.host
