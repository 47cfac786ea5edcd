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
# in_main READY: wait until a workload started with QW_READY=READY has
# reached its main (glibc mapped and started): until then the child of
# `W ... &` may still be the shell that forked it (-p PID's
# process(PID).function(...) then looks in bash or dash: "no function")
# or ld.so may not have mapped glibc yet (no runtime can be loaded).  A
# fixed sleep 0.2 was this wait: a child that took 0.5 s to exec made
# inline_attach.sh hang on its held workload.  Up to 60 s (a loaded
# machine); the check returns at once when it is there.
in_main() { wait_for 60 test -e "$1"; }
# busy N: N threads of W calling fay_inline_fn until $stop exists (the
# process's pid in wpid, its output in $T_TMP/work.out); orig: the
# function's first bytes before any query
busy() {
	local ready=$T_TMP/ready.$RANDOM
	stop=$T_TMP/stop
	rm -f "$stop"
	QW_READY=$ready "$W" threads "$1" "$stop" >"$T_TMP/work.out" & wpid=$!
	T_PIDS+=($wpid)
	in_main "$ready"
	orig=$(first_bytes $wpid)
}
# phase_query GO DONE ARGS...: with a workload (pid in wpid) that runs a
# phase when the file GO appears and writes DONE after it, run `fay query
# ARGS` (answer in $T_TMP/q.out, progress in $T_TMP/q.err, copied to
# $T_TMP/err) until it attached or failed, let the phase run, then end the
# query with SIGINT; a query that does not end within 60 s (a detach that
# hangs) is killed.  Its exit status in RC.
phase_query() {
	local go=$1 done=$2 q
	shift 2
	: >"$T_TMP/q.err"
	"$FAY" query "$@" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & q=$!
	T_PIDS+=($q)
	attached_or_gone() { grep -q 'attached' "$T_TMP/q.err" || ! kill -0 $q 2>/dev/null; }
	wait_for 60 attached_or_gone
	touch "$go"
	wait_for 60 test -e "$done"
	kill -INT $q 2>/dev/null
	wait_for 60 eval "! kill -0 $q"
	kill -9 $q 2>/dev/null
	wait $q
	RC=$?
	cp "$T_TMP/q.err" "$T_TMP/err"
}

# go_query GO ARGS...: with a workload (pid in wpid) waiting for the file
# GO, run `fay query ARGS` (its answer in $T_TMP/q.out, progress in
# $T_TMP/q.err) until it attached or failed, let the workload go, wait
# for it (its exit status in WRC), then end the query
go_query() {
	local go=$1 q
	shift
	: >"$T_TMP/q.err"
	timeout 120 "$FAY" query "$@" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & q=$!
	attached_or_gone() { grep -q 'attached' "$T_TMP/q.err" || ! kill -0 $q 2>/dev/null; }
	wait_for 60 attached_or_gone
	touch "$go"
	wait $wpid
	WRC=$?
	kill -INT $q 2>/dev/null
	wait $q
}
