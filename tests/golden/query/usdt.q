from q in usdt("/usr/sbin/mysqld:mysql:query__start")
let sql = str(q.arg(0))
select { pid: q.pid, sql: sql }
