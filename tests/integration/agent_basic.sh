#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay agent: manual and usage errors; spans of a live process delivered
# exactly once with the process's endpoint; the process exits: its file is
# removed and its counts logged; inotify finds new files at once;
# SIGTERM drains, ships and exits 0.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

# --- manual and usage --------------------------------------------------------
help=$("$FAY" agent --help); rc=$?
ok "--help exits 0" test $rc -eq 0
for s in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" ENVIRONMENT FILES; do
	ok "--help has $s" grep -q "^$s" <<<"$help"
done
"$FAY" agent --bogus 2>"$T_TMP/err"; rc=$?
ok "unknown option: exit 2" test $rc -eq 2
ok "unknown option named" grep -q "bogus" "$T_TMP/err"
"$FAY" agent --spool-max 12Q 2>"$T_TMP/err"; rc=$?
ok "bad --spool-max: exit 2 with the value" bash -c "[ $rc -eq 2 ] && grep -q \"'12Q'\" '$T_TMP/err'"
"$FAY" agent --flush-interval soon 2>"$T_TMP/err"; rc=$?
ok "bad --flush-interval: exit 2" test $rc -eq 2
"$FAY" agent --collector nonsense --state-dir "$T_TMP/x" --shm-dir "$SHM" 2>"$T_TMP/err"; rc=$?
ok "bad --collector: exit 1, named" bash -c "[ $rc -eq 1 ] && grep -q nonsense '$T_TMP/err'"

# --- a live process ------------------------------------------------------------
start_collector
start_agent
produce_bg --count 5000 --threads 4 --ids "$T_TMP/ids" --ready "$T_TMP/ready" \
	--hold "$T_TMP/release"
wait_for 10 test -e "$T_TMP/ready"
ok "5000 spans of a live process delivered" wait_delivered 5000
ok "each exactly once" exactly_once "$T_TMP/ids"
ok "local endpoint added from the shm header (service, port)" \
	test "$(awk '$4 == "producer" && $5 == 4242' "$OUT" | wc -l)" -eq 5000
ok "agent logged the process" agent_log_has "process $PROD (producer) seen"
f=$(ls "$SHM"/fay-$PROD-*.shm 2>/dev/null)
ok "shm file present while the process lives" test -n "$f"
ok "cursor file names the file's rings (saved within a second)" \
	wait_for 30 grep -q "^ring" "$STATE/cursors"

touch "$T_TMP/release"
wait $PROD
ok "process exit noticed (pidfd)" wait_for 30 agent_log_has "process $PROD (producer) gone (exited)"
ok "its file removed" wait_for 30 bash -c "! ls '$SHM'/fay-$PROD-*.shm >/dev/null 2>&1"
ok "its cursors forgotten" wait_for 30 bash -c "! grep -q '^ring' '$STATE/cursors'"
ok "gone line counts 5000 spans and no loss" \
	grep -q "process $PROD (producer) gone (exited): 5000 spans shipped to the spool; lost: 0 ring overwrite, 0 died mid-span" "$T_TMP/agent.log"
ok "stats: one process seen and gone" wait_for 30 bash -c "grep -q '\"seen\":1,\"gone\":1' '$STATE/stats.json'"
ok "stats: 5000 records drained, 5000 acked" \
	wait_for 30 bash -c "grep -q '\"records_drained\":5000' '$STATE/stats.json' && grep -q '\"spans_acked\":5000' '$STATE/stats.json'"
ok "STATS frames reached the collector" wait_for 30 grep -q '"agent_id"' "$T_TMP/cstats"
ok "spool empty after the ACKs (and a cursor save)" \
	wait_for 30 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"

stop_agent; rc=$?
ok "SIGTERM: exit 0" test $rc -eq 0

# --- inotify promptness and shutdown drain ------------------------------------
: >"$OUT"
# the clock starts once the agent is up (its start line: the inotify
# watch is set by then), not after a fixed 0.5 s: an agent slower to start
# (load) found the file late at its first scan, and the time was its start
started() { [ "$(grep -c '^info: agent .* on .*: shm ' "$T_TMP/agent.log")" -gt "$1" ]; }
n=$(grep -c '^info: agent .* on .*: shm ' "$T_TMP/agent.log")
start_agent --flush-interval 3s
wait_for 30 started "$n"
rm -f "$T_TMP/ready" "$T_TMP/release"
t0=$(date +%s%N)
produce_bg --count 100 --ids "$T_TMP/ids2" --ready "$T_TMP/ready" --hold "$T_TMP/release"
wait_for 3 agent_log_has "process $PROD (producer) seen"
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
diag "new file seen after ${ms} ms (flush interval 3 s)"
ok "new file found by inotify well within the flush interval" test $ms -lt 1500
wait_for 30 test -e "$T_TMP/ready"
t0=$(date +%s%N)
stop_agent; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
ok "SIGTERM with spans in the rings: exit 0 (after ${ms} ms)" test $rc -eq 0 -a $ms -lt 2900
ok "SIGTERM drained and shipped the spans before exiting" exactly_once "$T_TMP/ids2"
touch "$T_TMP/release"
wait $PROD

[ $T_FAILED -eq 0 ] || show_logs
done_testing
