from u in usdt("/bin/app:prov:probe") select u.duration
