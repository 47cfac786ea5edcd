#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 the collector while a client streams batches; restart it on the
# same store: every batch that was ACKed is there, none is there twice,
# and an agent resending everything (as after a reconnect) stores only
# what was missing.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

DB=$T_TMP/fay.db
ID=feedface00000000feedface00000000
N=400 M=200

for round in 1 2; do
	ok "round $round: collector starts" coll_start "$DB"
	A=127.0.0.1:$WP
	# paced (25 ms a batch: 10 s for the 400) so that the kill lands
	# mid-stream: unpaced, the 400 batches took under a second, and at a
	# load of 18 every one was ACKed before the poll below saw 20 and
	# the kill came (CI at aa3f401: 'killed mid-stream (400 of 400)')
	"$CLIENT" -a "$A" -i "$ID" -s $(( (round - 1) * N + 1 )) -n $N -m $M -W 8 -P 25000 send \
		>"$T_TMP/send$round.out" 2>&1 &
	SPID=$!
	# let some batches through, then SIGKILL mid-stream
	wait_for 20 bash -c "[ \$(grep -c '^ack' '$T_TMP/send$round.out') -ge 20 ]"
	kill -9 "$CPID"
	wait "$CPID" 2>/dev/null
	wait "$SPID"
	acked=$(grep -c '^ack' "$T_TMP/send$round.out")
	ok "round $round: killed mid-stream ($acked of $N batches ACKed)" [ "$acked" -ge 20 -a "$acked" -lt $N ]
done

ok "restart after kill -9 on the same store" coll_start "$DB"
A=127.0.0.1:$WP
"$CLIENT" -i "$ID" -s 1 -n $((2 * N)) -d "$DB" check >"$T_TMP/check1.out"
cat "$T_TMP"/send1.out "$T_TMP"/send2.out | awk '$1 == "ack" { print $2 }' | sort -n >"$T_TMP/acked"
missing=0
while read -r s; do
	c=$(awk -v s="$s" '$1 == s { print $2 }' "$T_TMP/check1.out")
	[ "$c" = "$M" ] || { missing=$((missing + 1)); diag "acked batch $s has $c spans"; }
done <"$T_TMP/acked"
ok "every ACKed batch ($(wc -l <"$T_TMP/acked")) is in the store, whole" [ $missing -eq 0 ]
ok "no batch stored twice or in part (each holds 0 or $M spans)" \
	bash -c "awk '\$2 != 0 && \$2 != $M' '$T_TMP/check1.out' | grep -q . && exit 1 || exit 0"

last=$("$CLIENT" -a "$A" -i "$ID" hello | sed 's/.*last_seq=//')
maxacked=$(tail -1 "$T_TMP/acked")
ok "WELCOME last_seq ($last) covers every ACKed batch (max $maxacked)" [ "$last" -ge "$maxacked" ]

# the agent resends everything of round 2 (round 1's seqs are below)
"$CLIENT" -a "$A" -i "$ID" -s 1 -n $((2 * N)) -m $M -W 8 -q send >"$T_TMP/resend.out" 2>&1
ok "resend of all batches: every one ACKed" [ "$(grep -c '^error\|^nack\|^closed' "$T_TMP/resend.out")" = 0 ]
"$CLIENT" -i "$ID" -s 1 -n $((2 * N)) -d "$DB" check >"$T_TMP/check2.out"
# batches of round 1 above last_seq at the time of the round 2 resend are
# duplicates if round 2 raised last_seq; those that were never stored
# stay empty (seq <= last_seq is never stored again: exactly once).
ok "after the resend: no batch holds more than $M spans" \
	bash -c "awk '\$2 > $M' '$T_TMP/check2.out' | grep -q . && exit 1 || exit 0"
ok "after the resend: every batch above round 2's last ACK is complete" \
	bash -c "awk -v l=$last '\$1 > l && \$2 != $M' '$T_TMP/check2.out' | grep -q . && exit 1 || exit 0"
ok "after the resend: every batch ACKed before is unchanged" \
	bash -c "while read s; do grep -qx \"\$s $M\" '$T_TMP/check2.out' || exit 1; done <'$T_TMP/acked'"
coll_stop
done_testing
