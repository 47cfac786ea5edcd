# A char[13] field at each offset modulo 8, streamed as columns.
from t in tracepoint("fay_golden:text_offsets")
where t.s0 != "x" && t.s2 != "x" && t.s4 != "x" && t.s6 != "x"
select { s0: t.s0, s1: t.s1, s2: t.s2, s3: t.s3, s4: t.s4, s5: t.s5, s6: t.s6, s7: t.s7 }
