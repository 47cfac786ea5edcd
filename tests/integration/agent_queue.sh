#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent's two threads: the drain thread fills batches in memory, the
# main thread writes them to the spool.  With the spool writer held (a
# disk that does not answer, FAY_AGENT_TEST_HOLD_SPOOL):
#  - kill -9 with drained batches only in memory, the producer meanwhile
#    overwriting its small ring: the restarted agent resumes where the
#    spool ends, delivers what the ring still holds, once, and counts the
#    rest as ring_overwrite: delivered + counted == produced;
#  - a full batch queue (--queue-max 2M): the drain pauses (logged and
#    counted), the ring overwrites what it cannot hold, counted; once the
#    writer is back everything drained is delivered, once.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

# One small ring: about 300 spans.
export FAY_RINGS=1 FAY_RING_KB=64
HOLD=$T_TMP/hold
no_dups_no_strangers() {  # IDS
	[ "$(awk '{print $2}' "$OUT" | sort | uniq -d | wc -l)" -eq 0 ] &&
	[ "$(awk '{print $2}' "$OUT" | sort -u | comm -13 <(sort -u "$1") - | wc -l)" -eq 0 ]
}
drained_ge() { [ "$(stat_of records_drained)" -ge "$1" ] 2>/dev/null; }
accounted() {  # PRODUCED: delivered + ring_overwrite (this agent's stats)
	[ $(( $(delivered) + $(stat_of ring_overwrite) )) -eq "$1" ] 2>/dev/null
}

start_collector

# --- kill -9 with batches only in memory ---------------------------------------
touch "$HOLD"
FAY_AGENT_TEST_HOLD_SPOOL=$HOLD start_agent
produce_bg --count 3000 --rate 3000 --ids "$T_TMP/ids1" --ready "$T_TMP/ready1" \
	--hold "$T_TMP/release1"
P1=$PROD
wait_for 10 test -e "$T_TMP/ready1"
ok "the drain thread read all 3000 spans into memory" wait_for 30 drained_ge 3000
ok "none reached the spool (writer held)" test -z "$(ls "$STATE/spool")"
kill9_agent
rm -f "$HOLD"
start_agent
ok "restarted: spans still in the ring delivered" wait_for 10 bash -c "[ \$(wc -l <'$OUT') -gt 0 ]"
sleep 0.5
ok "overwritten spans counted: delivered + ring_overwrite == 3000" wait_for 30 accounted 3000
# read once the sum is right: stats.json is rewritten every 200 ms (the
# killed agent's, with no loss, until then), and read after a fixed 0.5 s
# it was still the old one when the new agent was slow (load)
got=$(delivered); lost=$(stat_of ring_overwrite)
diag "delivered $got, counted lost $lost of 3000"
ok "the loss is counted, not zero" test "${lost:-0}" -gt 0
ok "no span twice, none unknown" no_dups_no_strangers "$T_TMP/ids1"
touch "$T_TMP/release1"
wait $P1
stop_agent

# --- a full batch queue ------------------------------------------------------------
: >"$OUT"
rm -rf "$STATE"
touch "$HOLD"
FAY_AGENT_TEST_HOLD_SPOOL=$HOLD start_agent --queue-max 2M
produce_bg --count 40000 --rate 20000 --ids "$T_TMP/ids2"
P2=$PROD
ok "the drain paused: every buffer waits for the writer" \
	wait_for 10 agent_log_has "all 2 batch buffers wait for the spool writer"
sleep 0.5
rm -f "$HOLD"
wait $P2
ok "the process is finished once its batches are spooled" \
	wait_for 10 agent_log_has "process $P2 (producer) gone (exited)"
# records_drained read on each try (stats.json is rewritten meanwhile)
all_drained_delivered() { [ "$(delivered)" -ge "$(stat_of records_drained)" ] 2>/dev/null; }
ok "delivered" wait_for 30 all_drained_delivered
sleep 0.5
ok "delivered + ring_overwrite == 40000" wait_for 30 accounted 40000
got=$(delivered); lost=$(stat_of ring_overwrite)
diag "delivered $got, counted lost $lost of 40000; drain stalls $(stat_of stalls), $(stat_of stalled_ms) ms"
ok "the overwrite is counted" test "${lost:-0}" -gt 0
ok "the stall is counted" test "$(stat_of stalls)" -ge 1
ok "the writer caught up (logged)" agent_log_has "spool writer caught up"
ok "no span twice, none unknown" no_dups_no_strangers "$T_TMP/ids2"
stop_agent; rc=$?
ok "agent exits 0" test $rc -eq 0

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
