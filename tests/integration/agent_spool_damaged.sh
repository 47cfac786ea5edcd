#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A damaged spool (#10): the agent spools while the collector is away and
# is killed; one spooled batch gets a flipped byte in its spans (its crc no
# longer matches) and another is cut short.  On restart the agent names each
# damaged file and why, removes it, counts the files and the spans they
# held (stats: spool.damaged_files, lost.spool_damaged), and delivers every
# other spooled span exactly once.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

start_collector
stop_collector
start_agent --flush-interval 100ms
produce_bg --count 3000 --rate 1500 --ids "$T_TMP/ids" --ready "$T_TMP/ready"
wait $PROD
ok "spans spooled while the collector is away" \
	wait_for 30 bash -c "[ \$(ls '$STATE/spool' | grep -c batch) -ge 3 ]"
sleep 1
kill9_agent
files=($(ls "$STATE/spool" | grep batch | sort))
diag "${#files[@]} spooled batches"
# spans per batch: the count at the start of the BATCH payload
count() { python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); print(struct.unpack_from("<I", b, 24)[0])' "$1"; }
f1=$STATE/spool/${files[0]} f2=$STATE/spool/${files[1]}
n1=$(count "$f1") n2=$(count "$f2")
python3 - "$f1" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x40                      # one bit, in the middle of the spans
open(p, "wb").write(b)
PY
truncate -s -100 "$f2"
start_collector
start_agent --flush-interval 100ms
# the producer is gone and its rings with it: both batches' spans are lost
want=$((3000 - n1 - n2))
ok "every other spooled span arrives: 3000 - $n1 (flipped) - $n2 (cut) = $want" wait_delivered "$want" 30
sleep 1
ok "... exactly once" test "$(delivered)" -eq "$want" -a "$(awk '{print $2}' "$OUT" | sort | uniq -d | wc -l)" -eq 0
ok "the flipped batch is named, with its checksum" agent_log_has "${files[0]} is damaged (.*checksum"
ok "the cut batch is named, with where it ends" agent_log_has "${files[1]} is damaged (.*is cut at"
ok "each loss is counted in spans ($n1, $n2)" \
	bash -c "grep -q '${files[0]} held $n1 spans' '$T_TMP/agent.log' && grep -q '${files[1]} held $n2 spans' '$T_TMP/agent.log'"
ok "stats: spool.damaged_files 2" wait_for 30 bash -c "grep -q '\"damaged_files\":2' '$STATE/stats.json'"
ok "stats: lost.spool_damaged $((n1 + n2)), so delivered + lost == produced" \
	wait_for 30 bash -c "grep -q '\"spool_damaged\":$((n1 + n2))' '$STATE/stats.json'"
stop_agent
[ $T_FAILED -eq 0 ] || show_logs 30
done_testing
