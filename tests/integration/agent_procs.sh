#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Traced processes dying: killed mid-span (only that span lost, counted),
# exited while no agent ran (drained and removed at start), a file whose
# pid now belongs to an unrelated process (pid reuse: orphan); and the
# spool bound: with the collector away, the oldest batches are evicted
# and every evicted span is counted.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

start_collector

# --- killed mid-span ------------------------------------------------------------------
start_agent
produce_bg --count 500 --ids "$T_TMP/ids1" --open-span --ready "$T_TMP/ready1" \
	--hold "$T_TMP/never"
P=$PROD
wait_for 10 test -e "$T_TMP/ready1"
ok "500 ended spans delivered" wait_delivered 500 10
kill -9 $P
wait $P 2>/dev/null
ok "death noticed" wait_for 30 agent_log_has "process $P (producer) gone"
# the agent logs the loss just after the "gone" line: waited for too
ok "exactly the open span counted lost" \
	wait_for 30 agent_log_has "process $P (producer): 1 spans lost: process died mid-span"
ok "stats: died_mid_span 1" wait_for 30 bash -c "grep -q '\"died_mid_span\":1' '$STATE/stats.json'"
ok "file removed" bash -c "! ls '$SHM'/fay-$P-*.shm >/dev/null 2>&1"
ok "exactly once, nothing else" exactly_once "$T_TMP/ids1"
stop_agent

# --- process gone before the agent starts -----------------------------------------
: >"$OUT"
produce --count 700 --ids "$T_TMP/ids2"
ok "file left behind by an exited process" bash -c "ls '$SHM'/fay-*.shm >/dev/null 2>&1"
start_agent
ok "drained and removed at start" \
	wait_for 30 bash -c "! ls '$SHM'/fay-*.shm >/dev/null 2>&1"
# the agent removes the file, then logs it gone: waited for, not read once
ok "logged as not running" wait_for 30 agent_log_has "gone (process not running)"
ok "its 700 spans delivered" wait_delivered 700 10
ok "exactly once" exactly_once "$T_TMP/ids2"
stop_agent

# --- pid reuse: the file's pid is a live process that does not map it ---------------
: >"$OUT"
produce --count 300 --ids "$T_TMP/ids3"
f=$(ls "$SHM"/fay-*.shm)
sleep 60 &
SL=$!
T_PIDS+=($SL)
# Same file, the header's pid and the name changed to sleep's pid.
python3 - "$f" "$SL" <<'PY'
import os, re, struct, sys
f, pid = sys.argv[1], int(sys.argv[2])
with open(f, 'r+b') as fh:
    fh.seek(32); fh.write(struct.pack('<I', pid))
d, b = os.path.split(f)
os.rename(f, os.path.join(d, re.sub(r'^fay-\d+-', 'fay-%d-' % pid, b)))
PY
start_agent
ok "pid alive but not the owner: treated as gone" \
	wait_for 30 agent_log_has "process $SL (producer) gone (pid does not map the file: exited or reused)"
ok "its spans delivered" wait_delivered 300 10
ok "exactly once" exactly_once "$T_TMP/ids3"
ok "the unrelated process was left alone" kill -0 $SL
stop_agent

# --- spool bound: evict oldest, count it -----------------------------------------------
: >"$OUT"
stop_collector
start_agent --spool-max 64k
produce --count 20000 --threads 2 --rate 20000 --ids "$T_TMP/ids4"
ok "spans evicted and counted" wait_for 30 bash -c "[ \"\$(grep -o '\"evicted_spans\":[0-9]*' '$STATE/stats.json' | cut -d: -f2)\" -gt 0 ]"
sleep 0.5
bytes=$(cat "$STATE"/spool/*.batch | wc -c)
ok "spool within its bound ($bytes bytes <= 65536)" test "$bytes" -le 65536
ok "eviction warned" agent_log_has "spool: full"
start_collector
ok "spool drained after the collector returns" \
	wait_for 15 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"
sleep 0.5
ev=$(stat_of evicted_spans)
got=$(delivered)
diag "delivered $got, evicted $ev of 20000"
ok "delivered + evicted == produced" test $((got + ev)) -eq 20000
ok "no duplicates, nothing unknown" bash -c "[ \$(awk '{print \$2}' '$OUT' | sort | uniq -d | wc -l) -eq 0 ] && [ \$(awk '{print \$2}' '$OUT' | sort -u | comm -13 <(sort -u '$T_TMP/ids4') - | wc -l) -eq 0 ]"
stop_agent

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
