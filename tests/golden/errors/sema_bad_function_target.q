from f in function("read") select count()
