from p in profile(0) select count()
