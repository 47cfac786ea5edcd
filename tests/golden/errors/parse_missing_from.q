select count()
