#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent and an unreliable collector: not there at start (spool, then
# reconnect with backoff), dropping connections mid-batch, NACKing
# batches, sending a corrupt frame, restarted mid-stream.  Every span is
# stored exactly once throughout.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

# --- collector not there at start ---------------------------------------------
PORT=$(free_port)
start_agent
produce --count 3000 --ids "$T_TMP/ids1"
ok "batches wait in the spool" wait_for 30 bash -c "ls '$STATE/spool' | grep -q batch"
ok "the outage is logged once as a warning" \
	wait_for 30 bash -c "[ \$(grep -c 'retrying with backoff' '$T_TMP/agent.log') -eq 1 ]"
sleep 1.5
start_collector
# timed from the collector listening (its port file), not from before its
# start: the fake collector's own start under load is no reconnect delay
t0=$(date +%s%N)
ok "delivered after the collector appears" wait_delivered 3000 30
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "delivered ${ms} ms after the collector started"
ok "reconnected within the 5 s backoff cap" test $ms -lt 6000
ok "exactly once" exactly_once "$T_TMP/ids1"
stop_agent
stop_collector

# --- drops and NACKs --------------------------------------------------------------
: >"$OUT"
start_collector --drop-every 4 --nack-every 3
start_agent
produce --count 8000 --threads 2 --rate 2000 --ids "$T_TMP/ids2"
ok "8000 spans through drops and NACKs" wait_delivered 8000 40
sleep 0.5
ok "exactly once" exactly_once "$T_TMP/ids2"
ok "NACKed batches resent after reconnecting" agent_log_has "reconnecting to resend it"
ok "batch seqs stored in increasing order (resent under their own seq)" \
	bash -c "awk '{print \$1}' '$OUT' | uniq | sort -c -n"
ok "collector did NACK" grep -q "NACK batch" "$T_TMP/coll.log"
ok "collector did drop connections" grep -q "dropping the connection" "$T_TMP/coll.log"
stop_agent
stop_collector

# --- a corrupt frame from the collector --------------------------------------------
: >"$OUT"
start_collector --garbage-after 2
start_agent
produce --count 2000 --rate 1000 --ids "$T_TMP/ids3"
ok "2000 spans despite a corrupt frame" wait_delivered 2000 30
sleep 0.3
ok "exactly once" exactly_once "$T_TMP/ids3"
ok "the bad frame was named and the connection reset" agent_log_has "checksum"
stop_agent
stop_collector

# --- collector restarted mid-stream (keeps its last_seq) ---------------------------
: >"$OUT"
hellos0=$(grep -c HELLO "$T_TMP/coll.log")
start_collector
start_agent
produce_bg --count 6000 --threads 2 --rate 1500 --ids "$T_TMP/ids4"
P=$PROD
sleep 1
stop_collector
sleep 1
start_collector
wait $P
ok "6000 spans across a collector restart" wait_delivered 6000 30
sleep 0.3
ok "exactly once" exactly_once "$T_TMP/ids4"
# (coll.log holds the earlier rounds' HELLOs too: counted from here)
ok "agent reconnected (two HELLOs in this round)" \
	test $(( $(grep -c HELLO "$T_TMP/coll.log") - hellos0 )) -ge 2
stop_agent; rc=$?
ok "agent exits 0" test $rc -eq 0

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
