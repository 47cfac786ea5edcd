# The issue's query: comm is a char[16] at offset 20 (4 mod 8), and
# 'group' is a field named like a keyword.
from t in tracepoint("signal:signal_generate")
where t.comm == "bash"
group t by t.comm into g
select { comm: g.key, n: g.count(), group_sigs: g.sum(t.group) }
