#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 of the agent loses nothing that was in the rings and duplicates
# nothing: repeated kills while processes write spans, a crash exactly
# between "batch spooled" and "cursors saved" (testpoint), and a kill while
# the collector is away (everything only in the spool).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

# No span may appear in two different batches: that would be a duplicate
# the collector's seq check cannot catch.
one_batch_each() {
	[ "$(awk '{print $2}' "$OUT" | sort | uniq -d | wc -l)" -eq 0 ]
}

start_collector

# --- repeated kill -9 under load ------------------------------------------------
start_agent
produce_bg --count 20000 --threads 4 --rate 2000 --ids "$T_TMP/ids1" \
	--ready "$T_TMP/ready1" --hold "$T_TMP/release1"
P1=$PROD
for i in 1 2 3 4; do
	sleep 0.6
	kill9_agent
	sleep 0.2
	start_agent
done
wait_for 30 test -e "$T_TMP/ready1"
ok "20000 spans through 4 kill -9 restarts" wait_delivered 20000 30
sleep 0.5
ok "exactly once" exactly_once "$T_TMP/ids1"
ok "no span in two batches" one_batch_each
ok "restarted agents resumed from saved cursors" agent_log_has "rings resumed from saved cursors"
touch "$T_TMP/release1"
wait $P1

# --- crash between spooling a batch and saving the cursors ----------------------
: >"$OUT"
kill9_agent
FAY_AGENT_CRASH_AFTER_SPOOL=3 start_agent
produce_bg --count 6000 --threads 2 --rate 3000 --ids "$T_TMP/ids2" \
	--ready "$T_TMP/ready2" --hold "$T_TMP/release2"
P2=$PROD
wait "$AGENT_PID" 2>/dev/null; rc=$?
AGENT_PID=
ok "testpoint killed the agent after its 3rd spooled batch (rc $rc)" test $rc -eq 137
ok "testpoint logged" agent_log_has "testpoint: batch"
start_agent
wait_for 10 test -e "$T_TMP/ready2"
ok "6000 spans after the crash" wait_delivered 6000 30
sleep 0.5
ok "exactly once across the crash window" exactly_once "$T_TMP/ids2"
ok "no span in two batches" one_batch_each
touch "$T_TMP/release2"
wait $P2

# --- kill -9 while the collector is away: the spool carries it -----------------
: >"$OUT"
stop_collector
produce_bg --count 3000 --ids "$T_TMP/ids3" --ready "$T_TMP/ready3"
P3=$PROD
wait $P3
ok "spans spooled while the collector is down" \
	wait_for 30 bash -c "ls '$STATE/spool' | grep -q batch"
ok "the exited process's file is removed" \
	wait_for 30 bash -c "! ls '$SHM'/fay-$P3-*.shm >/dev/null 2>&1"
kill9_agent
start_collector
start_agent
ok "3000 spooled spans delivered after restart" wait_delivered 3000 30
sleep 0.5
ok "exactly once" exactly_once "$T_TMP/ids3"
ok "spool emptied" wait_for 30 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"
stop_agent

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
