# context switches away from bash, by CPU and next task
from t in tracepoint("sched:sched_switch")
where t.prev_comm == "bash" && t.prev_state != 0
group t by { cpu: t.cpu, next: t.next_comm } into g
select { cpu: g.cpu, next: g.next, switches: g.count(), tasks: distinct(t.next_pid) }
order by switches desc
limit 10
