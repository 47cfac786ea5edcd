# SPDX-License-Identifier: MIT
# Shared by bench/bench_inline_stack.sh and bench/bench_ustack_bpf.sh (the
# cost of a stack key on stack_work's C): the traced loop's CPU time, the
# median, and the report of the rounds.

# cpu FILE: the cpu_ns line stack_work printed (QW_TIME=1)
cpu() { sed -n 's/^cpu_ns \([0-9]*\)$/\1/p' "$1"; }
median() { python3 -c 'import sys; v=sorted(float(x) for x in sys.argv[1:]); print("%.1f" % v[len(v)//2])' "$@"; }

# stack_report CALLS: the machine, the load and the run's shape, then
# each query of NAMES with its median of res[] (into med[]) and its runs
stack_report() {
	echo "date: $(date -u '+%F %T') UTC; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); kernel $(uname -r)"
	echo "C called from $((N + 3)) frames; $1; $R rounds"
	for q in "${NAMES[@]}"; do
		# shellcheck disable=SC2086
		med[$q]=$(median ${res[$q]})
		printf '%-9s %8s ns/call   (%s)\n' "$q" "${med[$q]}" "${res[$q]# }"
	done
}

# stack_bases: base and base_nofp, the unprobed loop's ns per call of W
# and WN (stack_work deep N K), measured now
stack_bases() {
	"$W" deep "$N" "$K" >"$T/o"
	base=$(python3 -c "print($(cpu "$T/o") / $K)")
	"$WN" deep "$N" "$K" >"$T/o"
	base_nofp=$(python3 -c "print($(cpu "$T/o") / $K)")
}

# stack_compare UNIT WHOLE: what the stack key adds, from med[] (count,
# fp, table, nofp, and bt when bpftrace ran), UNIT after "stack key" ("",
# " a sample"), and the table walk's whole WHOLE ("probe", "program")
# against bpftrace's
stack_compare() {
	python3 - "$1" "$2" "${med[count]}" "${med[fp]}" "${med[table]}" "${med[nofp]}" "${med[bt]:-0}" <<'PY'
import sys
unit, whole = sys.argv[1:3]
c, fp, tab, nofp, bt = map(float, sys.argv[3:8])
print("stack key%s: by frame pointers %.1f ns, by the table %.1f (fp code), %.1f (no-fp code); "
      "table / fp: %.2f" % (unit, fp - c, tab - c, nofp - c, (tab - c) / (fp - c)))
if bt:
    print("fay's table walk / bpftrace's ustack (whole %s): %.2f" % (whole, tab / bt))
PY
}
