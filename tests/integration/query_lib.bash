# SPDX-License-Identifier: MIT
# Sourced by tests/integration/query_*.sh (not a test itself: no .sh): run
# fay query and compare its output exactly.

# need_query_work: the fay binary (a failure without it) and the
# query_work workload, its path in W (the test is skipped without it).
need_query_work() {
	W=$BUILD/tests/bin/query_work
	[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
	[ -x "$W" ] || skip_all "query_work is not built (make)"
}

# attached_or_gone ERR PID: fay query PID (its stderr in ERR) attached
# its probes, or ended (a refusal): for wait_for
attached_or_gone() { grep -q 'attached' "$1" || ! kill -0 "$2" 2>/dev/null; }

# fq ARGS...: fay query -q, stdout in $T_TMP/out, stderr in $T_TMP/err, rc in $RC
fq() {
	timeout 60 "$FAY" query -q "$@" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
}
# same OUT WANT WHAT: exact comparison of a file with a string (and RC 0)
same() {
	local got
	got=$(cat "$1")
	if [ "$got" = "$2" ] && [ "$RC" -eq 0 ]; then
		pass "$3"
	else
		fail "$3 (rc=$RC)" "got:  $(echo "$got" | head -c 1500)" "want: $2" "$(head -c 600 "$T_TMP/err")"
	fi
}

# held BIN MODE K QUERY [OPTION...]: fay query OPTION... QUERY on one run
# of BIN MODE K (a workload that knows QW_WAIT), held at a file until fay
# is attached; @PID@ in QUERY and the options is the workload's pid.
# fay's output in $T_TMP/out, its messages in $T_TMP/err, its status in RC.
held() {
	local go=$T_TMP/go.$RANDOM bin=$1 mode=$2 k=$3 q=$4 wpid fpid
	shift 4
	QW_WAIT=$go "$bin" "$mode" "$k" & wpid=$!
	: >"$T_TMP/err"
	timeout 60 "$FAY" query "${@//@PID@/$wpid}" "${q//@PID@/$wpid}" \
		>"$T_TMP/out" 2>"$T_TMP/err" & fpid=$!
	wait_for 30 grep -q attached "$T_TMP/err"
	touch "$go"
	wait $wpid
	wait $fpid
	RC=$?
}

# versus FAYQ BTPROG NPROBES MODE K: fay and bpftrace trace one run of
# $W MODE K (query_work, or a workload that knows QW_READY/QW_WAIT as it
# does), held at a file until both are attached (@PID@ in BTPROG is its
# pid).  bpftrace prints "Attaching N probes" before it attaches them: it
# is attached when NPROBES of its perf events hold a BPF program.  fay's
# JSON in $T_TMP/out, bpftrace's maps in $T_TMP/bt, fay's status in RC, the
# workload's /proc/PID/maps once started in $T_TMP/maps.  VS_MODE=uprobe:
# fay with --probe-mode=uprobe (a function(...) source on one process
# otherwise goes inline, and bpftrace's uprobe on a function fay patched
# restores the file's first instruction in the middle of the jump: the
# workload crashes; inline probes refuse a function under another
# tracer's uprobe, the reverse order fay cannot stop, issue #19).
bt_attached() {
	local p n
	# $1 is what `timeout ... bpftrace &` gave: timeout, whose child is
	# bpftrace.  Attached: NPROBES of its perf events hold a BPF program
	# (bpftool perf list).  Counting its perf events alone was wrong: its
	# per-CPU output buffers are perf events too, opened first
	p=$(pgrep -P "$1" -x bpftrace | head -1)
	n=$(bpftool perf list 2>/dev/null | grep -c "^pid ${p:-$1} ")
	[ "$n" -ge "$2" ]
}
versus() {
	local go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM wpid fpid bpid
	QW_READY=$ready QW_WAIT=$go "$W" "$4" "$5" & wpid=$!
	wait_for 30 test -e "$ready"
	cp "/proc/$wpid/maps" "$T_TMP/maps" 2>/dev/null	# for addresses bpftrace cannot name
	: >"$T_TMP/err"
	timeout 90 "$FAY" query --json ${VS_MODE:+--probe-mode=$VS_MODE} -p $wpid "$1" \
		>"$T_TMP/out" 2>"$T_TMP/err" & fpid=$!
	timeout 90 "$BT" -p $wpid -e "${2//@PID@/$wpid}" >"$T_TMP/bt" 2>&1 & bpid=$!
	wait_for 30 grep -q attached "$T_TMP/err"
	wait_for 60 bt_attached $bpid "$3"
	touch "$go"
	wait $wpid
	wait $fpid
	RC=$?
	wait $bpid
}

# compare SKIP PREFIX WANT: fay's JSON rows (name, n) in $T_TMP/out
# against bpftrace's @[PREFIXname] counts in $T_TMP/bt, names matching
# the regex SKIP left out; WANT "name=n" must hold in both.  The verdict
# in $T_TMP/cmp.
compare() {
	python3 -c '
import json, re, sys
out, bt_file, skip, prefix, want = sys.argv[1:]
keep = lambda n: not re.fullmatch(skip, n)
fay = {r["name"]: r["n"] for r in map(json.loads, open(out)) if keep(r["name"])}
bt = {}
for l in open(bt_file):
    m = re.match(r"@\[" + re.escape(prefix) + r"(\w+)\]: (\d+)", l)
    if m and keep(m.group(1)):
        bt[m.group(1)] = int(m.group(2))
w, n = want.split("=")
assert fay.get(w) == int(n) and bt.get(w) == int(n), (fay, bt)
assert fay == bt, ("fay", sorted(fay.items()), "bpftrace", sorted(bt.items()))
print(len(fay), "names,", sum(fay.values()), "events")
' "$T_TMP/out" "$T_TMP/bt" "$1" "$2" "$3" >"$T_TMP/cmp" 2>&1
}

# compare_check WHAT SKIP PREFIX WANT: compare (above) after a run whose
# status is $RC, as one check: "WHAT equals bpftrace's @[probe] for the
# pid", with the verdict, or the failure with fay's and bpftrace's output.
compare_check() {
	local what=$1
	shift
	if [ "$RC" -eq 0 ] && compare "$@"; then
		pass "$what equals bpftrace's @[probe] for the pid ($(cat "$T_TMP/cmp"))"
	else
		fail "$what equals bpftrace's @[probe] (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" \
			"$(head -c 400 "$T_TMP/err")" "$(head -c 600 "$T_TMP/bt")"
	fi
}
