from f in kernel.function("vfs_read") select { p99: quantile(f.duration, 0.99), bytes: hist(f.ret) } window 1s
