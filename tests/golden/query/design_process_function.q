from c in process(4242).function("handle_request") where c.duration > 1ms select { pid: c.pid, us: c.duration / 1000 }
