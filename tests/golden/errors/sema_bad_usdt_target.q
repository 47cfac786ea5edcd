from u in usdt("/bin/app:probe") select count()
