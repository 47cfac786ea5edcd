# After '.', a keyword is a field name: kmem:mm_page_alloc's 'order' and
# signal_generate's 'group' (53 fields on a 6.18 kernel are named like
# keywords: order, group, from, limit, window ...).
from t in tracepoint("kmem:mm_page_alloc")
where t.order > 0 && t.order != 11
group t by t.order into g
select { ord: g.key, n: g.count(), pages: g.sum(1 << t.order) }
order by ord desc
