from k in kernel.fn("vfs_read") select count()
