# SPDX-License-Identifier: MIT
# Helpers of the inline-probe tests, sourced after lib.sh: root, fay and
# the workload W (inline_work) are there, or the test stops saying why.
need_root
W=$BUILD/tests/bin/inline_work
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$W" ] || skip_all "inline_work is not built (make)"
# first_bytes PID: the first 5 bytes of fay_inline_fn in PID, as hex
first_bytes() {
	python3 - "$1" "$W" <<'PY'
import subprocess, sys
pid, exe = sys.argv[1], sys.argv[2]
off = None
for l in subprocess.run(["nm", exe], capture_output=True, text=True).stdout.splitlines():
    f = l.split()
    if len(f) == 3 and f[2] == "fay_inline_fn":
        off = int(f[0], 16)
base = None
for l in open(f"/proc/{pid}/maps"):
    f = l.split()
    if len(f) >= 6 and f[5].endswith("/inline_work") and int(f[2], 16) == 0:
        base = int(f[0].split("-")[0], 16)
        break
with open(f"/proc/{pid}/mem", "rb") as m:
    m.seek(base + off)
    print(m.read(5).hex())
PY
}
# busy N: N threads of W calling fay_inline_fn until $stop exists (the
# process's pid in wpid, its output in $T_TMP/work.out); orig: the
# function's first bytes before any query
busy() {
	stop=$T_TMP/stop
	rm -f "$stop"
	"$W" threads "$1" "$stop" >"$T_TMP/work.out" & wpid=$!
	T_PIDS+=($wpid)
	sleep 0.3
	orig=$(first_bytes $wpid)
}
