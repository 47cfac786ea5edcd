#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two agents with one id (a cloned state directory) shipping to one real
# collector (issue #10): the collector refuses the second live connection
# of an id, the agent refuses a WELCOME with seqs it never numbered; both
# say why, and nothing is dropped: the clone's spans wait in its spool and
# are stored once it has its own id.  A client committing a seq 2^63 under
# an agent's id is refused.  A HELLO host with a newline is logged on one
# line.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
TOOLS=$BUILD/tests/bin
[ -x "$TOOLS/span_producer" ] || skip_all "agent test tools not built"
export FAY_RINGS=2 FAY_RING_KB=1024 FAY_POOL=64

coll_start "$T_TMP/db"
stored() { metric fay_collector_spans_stored_total; }
stored_is() { [ "$(stored)" = "$1" ]; }

agent() {   # agent NAME [options]: state $T_TMP/NAME, shm $T_TMP/NAME.shm
	local n=$1; shift
	mkdir -p "$T_TMP/$n.shm"
	"$FAY" agent --collector 127.0.0.1:$WP --shm-dir "$T_TMP/$n.shm" --state-dir "$T_TMP/$n" \
		--flush-interval 20ms --stats-interval 200ms "$@" 2>>"$T_TMP/$n.log" &
	eval "PID_$n=$!"; T_PIDS+=($!)
}
produce() { FAY_SHM_DIR=$T_TMP/$1.shm "$TOOLS/span_producer" --count "$2" --service "$1"; }

agent a --host host-a
produce a 300
ok "agent a: 300 spans stored" wait_for 10 stored_is 300
kill $PID_a; wait $PID_a
cp -a "$T_TMP/a" "$T_TMP/b"          # the clone
rm -f "$T_TMP/b"/*.lock 2>/dev/null

# a must hold the id before the clone says HELLO: a fixed pause was not
# enough under load (a slow to start, b connected first and a was the one
# refused); wait for the collector to log a's new connection
connected_a() { grep -c "wire: agent .* (host-a) connected" "$T_TMP/collector.log"; }
connected_a_gt() { [ "$(connected_a)" -gt "$1" ]; }
n=$(connected_a)
agent a --host host-a
ok "a connected again" wait_for 30 connected_a_gt "$n"
agent b --host host-b
ok "the clone's HELLO is refused while a is connected" \
	wait_for 10 grep -q "already connected from .*by another agent process" "$T_TMP/b.log"
ok "... and the collector says so" grep -q "two agents with one id" "$T_TMP/collector.log"
kill $PID_b; wait $PID_b
produce a 200
wait_for 10 stored_is 500
produce a 100
ok "a's spans stored in two more batches (600)" wait_for 10 stored_is 600
kill $PID_a; wait $PID_a
agent b --host host-b
produce b 50
ok "a gone: the clone finds seqs it never numbered and keeps its spans" \
	wait_for 10 grep -q "another agent uses this id" "$T_TMP/b.log"
ok "... and the collector warns that the id changed hosts" \
	grep -q 'was host "host-a", now "host-b"' "$T_TMP/collector.log"
sleep 1
ok "... nothing of b stored as a duplicate (still 600)" test "$(stored)" = 600
ok "collector: no duplicate spans" test "$(metric fay_collector_spans_duplicate_total)" = 0
kill $PID_b; wait $PID_b
rm "$T_TMP/b/agent_id"
agent b --host host-b
ok "b with its own id: its 50 spans stored, exactly (650)" wait_for 15 stored_is 650
sleep 0.5
ok "... and no more" test "$(stored)" = 650
kill $PID_b; wait $PID_b

# A client claiming a's id with a seq of 2^63.
ID=$(cat "$T_TMP/a/agent_id")
out=$("$CLIENT" -a 127.0.0.1:$WP -i "$ID" -s 9223372036854775807 -n 1 send 2>&1)
ok "seq 2^63-1 under a's id: refused, naming the jump" \
	grep -q "refused, a jump of more than 2^32" <<<"$out$(cat "$T_TMP/collector.log")"
agent a --host host-a
produce a 100
ok "a is not blinded: its next 100 spans stored (750)" wait_for 10 stored_is 750
kill $PID_a; wait $PID_a

# A HELLO host name with a newline: one log line, the newline shown as '?'.
"$CLIENT" -a 127.0.0.1:$WP -i 0123456789abcdef0123456789abcdef -H $'evil\nerror: forged' hello \
	>/dev/null 2>&1
ok "a newline in the HELLO host is not a log line" \
	bash -c "! grep -q '^error: forged' '$T_TMP/collector.log' && grep -q 'evil?error: forged' '$T_TMP/collector.log'"
ok "collector up" coll_alive
coll_stop

[ $T_FAILED -eq 0 ] || { cat "$T_TMP"/a.log "$T_TMP"/b.log; echo "stored $(stored)"; tail -15 "$T_TMP/collector.log"; }
done_testing
