from s in sycall("read") select s.pid
