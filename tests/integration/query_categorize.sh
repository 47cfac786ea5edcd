#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# categorize (Fay's automatic analysis of behaviour) on this host, with
# real BPF: seven processes of one uid, named by what they do (copies of
# query_work), grouped by their system-call mix
#   cw-file-a, cw-file-b   openat in a loop
#   cw-ppid-a, cw-ppid-b   getppid in a loop
#   cw-idle-a, cw-idle-b   1 ms sleeps
#   cw-shift               sleeps until the first window is out, then
#                          getppid in a loop (a time, not a count of
#                          sleeps: 1 ms sleeps last longer on a loaded
#                          machine)
# must come out as exactly the three groups in every window, cw-shift
# first with the sleepers and at the end with the getppid loops, reported
# as changed in between; the text table shows the same categories.
. "$(dirname "$0")/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"
command -v setpriv >/dev/null || skip_all "no setpriv (util-linux)"

U=4242
# exec: the pid bg records is the workload's own (cleanup kills it); every
# workload ends by itself after 90 s whatever happens to this script
run_as() { exec timeout 90 nice setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
for n in cw-file-a cw-file-b cw-ppid-a cw-ppid-b cw-idle-a cw-idle-b cw-shift; do
	cp "$W" "$T_TMP/$n"
done
mkdir -m 1777 "$T_TMP/run"	# where the workloads (uid U) say they are ready
chmod 755 "$T_TMP" "$T_TMP"/cw-*
go=$T_TMP/go
start() {	# start NAME READY MODE K [N]: under uid U, recorded for cleanup
	local name=$1 ready=$2; shift 2
	QW_READY=$ready bg run_as "$T_TMP/$name" "$@"
}
start cw-file-a "$T_TMP/run/r1" open 2000000000
start cw-file-b "$T_TMP/run/r2" open 2000000000
start cw-ppid-a "$T_TMP/run/r3" getppid 2000000000
start cw-ppid-b "$T_TMP/run/r4" getppid 2000000000
start cw-idle-a "$T_TMP/run/r5" sleep 1000000 1000
start cw-idle-b "$T_TMP/run/r6" sleep 1000000 1000
start cw-shift "$T_TMP/run/r7" sleep 1000000 1000	# killed after the first window
shift1=${T_PIDS[-1]}
# the second phase of cw-shift waits (QW_WAIT) until the first has ended
QW_READY=$T_TMP/run/r8 QW_WAIT=$go bg run_as "$T_TMP/cw-shift" getppid 2000000000
ok "the workloads are up" wait_for 30 bash -c 'for i in 1 2 3 4 5 6 7 8; do [ -e "$1/run/r$i" ] || exit 1; done' _ "$T_TMP"
( while kill -0 "$shift1" 2>/dev/null; do sleep 0.1; done; touch "$go" ) &
T_PIDS+=($!)

Q='from s in tracepoint("raw_syscalls:sys_enter") where s.uid == '$U'
group s by {comm: s.comm, call: s.id} into g
select { comm: g.comm, call: g.call, n: g.count() }
categorize comm by call into 3 window 2s for 12s'
timeout 60 "$FAY" query --json "$Q" >"$T_TMP/out.json" 2>"$T_TMP/err" </dev/null &
QPID=$!
ok "the first window is out" wait_for 30 grep -q '"categories"' "$T_TMP/out.json"
kill "$shift1"	# cw-shift's sleeps end: its getppid loop goes
wait $QPID
ok "fay query --json with categorize runs" [ $? -eq 0 ]

python3 - "$T_TMP/out.json" >"$T_TMP/verdict" <<'EOF'
import json, sys
wins = [json.loads(l) for l in open(sys.argv[1]) if '"categories"' in l]
groups = [{"cw-file-a", "cw-file-b"}, {"cw-ppid-a", "cw-ppid-b"}, {"cw-idle-a", "cw-idle-b"}]
def cat_of(w, e):
    for c in w["categories"]:
        if e in c["members"]:
            return c["category"]
exact = 0
for w in wins:
    cats = [cat_of(w, next(iter(g))) for g in groups]
    same = all(cat_of(w, e) == cats[i] for i, g in enumerate(groups) for e in g)
    exact += same and len(set(cats)) == 3 and None not in cats
print("windows", len(wins))
print("exact", exact)
first, last = wins[0], wins[-1]
print("shift_first_idle", cat_of(first, "cw-shift") == cat_of(first, "cw-idle-a"))
print("shift_last_ppid", cat_of(last, "cw-shift") == cat_of(last, "cw-ppid-a"))
ch = [c for w in wins for c in w["changed"] if c["entity"] == "cw-shift"]
print("shift_changed", len(ch) == 1 and ch[0]["from"] == cat_of(first, "cw-idle-a")
      and ch[0]["to"] == cat_of(last, "cw-ppid-a"))
others = [c for w in wins for c in w["changed"] if c["entity"] != "cw-shift"
          and c["entity"].startswith("cw-")]
print("others_stay", not others)
rows = [json.loads(l) for l in open(sys.argv[1]) if '"categories"' not in l]
print("rows_carry_category", bool(rows) and all("category" in r for r in rows))
EOF
v() { sed -n "s/^$1 //p" "$T_TMP/verdict"; }
ok "5 or more windows categorized ($(v windows))" [ "$(v windows)" -ge 5 ]
ok "the three groups recovered exactly in every window ($(v exact) of $(v windows))" \
	[ "$(v exact)" = "$(v windows)" ]
ok "cw-shift starts with the sleepers" [ "$(v shift_first_idle)" = True ]
ok "cw-shift ends with the getppid loops" [ "$(v shift_last_ppid)" = True ]
ok "cw-shift reported changed once, from the sleepers' category to the getppid one" \
	[ "$(v shift_changed)" = True ]
ok "no other workload changed category" [ "$(v others_stay)" = True ]
ok "every JSON row carries its entity's category" [ "$(v rows_carry_category)" = True ]
[ "$(v exact)" = "$(v windows)" ] || { diag "$(cat "$T_TMP/out.json" | grep categories)"; }

# the table: one categories block per window with the groups on a line each
timeout 30 "$FAY" query "${Q/for 12s/for 3s}" >"$T_TMP/out.txt" 2>"$T_TMP/err2" </dev/null
ok "the table has a categories block per window" \
	grep -q '^categories (k-means, 3 of 3 used' "$T_TMP/out.txt"
ok "the table lists cw-file-a and cw-file-b in one category" \
	grep -Eq '^ +[0-9]+ +2  cw-file-a cw-file-b ' "$T_TMP/out.txt"

# errors name what is wrong and where
out=$("$FAY" query --emit=plan 'from s in syscall("read") group s by s.comm into g select { c: g.key, n: g.count() } categorize c by nope into 3' 2>&1)
ok "an unknown column is named with its position" \
	bash -c '[[ $1 == *"1:102: error: categorize: no select column '"'nope'"'"* ]]' _ "$out"
out=$("$FAY" query --emit=plan 'from s in syscall("read") group s by s.comm into g select { c: g.key, n: g.count() } categorize c by c into 0' 2>&1)
ok "into 0 is refused" bash -c '[[ $1 == *"categories must number 1 to 32"* ]]' _ "$out"
pkill -KILL -u $U 2>/dev/null
done_testing
