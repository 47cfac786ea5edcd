# A char[13] field at each offset modulo 8 (tracefs/events/fay_golden):
# filters, a tuple key and columns.  Each piece of a copy is as wide as
# both the context offset and the stack offset allow (no misaligned
# stack access for the verifier to refuse).
from t in tracepoint("fay_golden:text_offsets")
where t.s1 == "ab" && t.s3 != "xyz" && t.s5 != "" && t.s7 == "abcdefghijkl"
group t by { s0: t.s0, s1: t.s1, s2: t.s2, s3: t.s3, s4: t.s4, s5: t.s5, s6: t.s6, s7: t.s7 } into g
select { s0: g.s0, s1: g.s1, s2: g.s2, s3: g.s3, s4: g.s4, s5: g.s5, s6: g.s6, s7: g.s7, n: g.count() }
