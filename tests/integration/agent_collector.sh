#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent against the real `fay collector` (SQLite store): spans of
# processes stored exactly once through an agent kill -9 and a collector
# kill -9; the token is checked; the process's endpoint becomes the
# Zipkin service.  A collector whose store fails now and then (NACK test
# point): it commits nothing sent after a NACKed batch on that connection,
# and the agent, resending under the same seqs, gets everything stored
# exactly once.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 shell"
"$FAY" collector --help >/dev/null 2>&1 || skip_all "fay collector not built"

DB=$T_TMP/fay.db
PORT=$(free_port)
HTTP=$(free_port)
CPID=
start_real() {
	"$FAY" collector --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" --db "$DB" \
		--token s3cret 2>>"$T_TMP/coll.log" &
	CPID=$!
	T_PIDS+=($CPID)
	wait_for 10 curl -sf "http://127.0.0.1:$HTTP/health"
}
stored() { sqlite3 "$DB" "select count(*) from spans" 2>/dev/null || echo 0; }
stored_ge() { [ "$(stored)" -ge "$1" ]; }
# Every produced span id stored exactly once.
stored_exactly_once() {
	sqlite3 "$DB" "select printf('%016x', id) from spans" | sort >"$T_TMP/got"
	sort -u "$@" >"$T_TMP/want"
	if cmp -s "$T_TMP/got" "$T_TMP/want"; then return 0; fi
	echo "# want $(wc -l <"$T_TMP/want"), stored $(wc -l <"$T_TMP/got"), distinct $(sort -u "$T_TMP/got" | wc -l)"
	return 1
}

ok "collector up" start_real
start_agent --token s3cret
produce_bg --count 9000 --threads 3 --rate 1500 --ids "$T_TMP/ids" --ready "$T_TMP/ready"
P=$PROD
sleep 1
kill9_agent
start_agent --token s3cret
sleep 0.7
kill -9 "$CPID"; wait "$CPID" 2>/dev/null
start_real
wait $P
ok "9000 spans stored through agent and collector kill -9" \
	wait_for 30 stored_ge 9000
sleep 0.5
ok "each exactly once" stored_exactly_once "$T_TMP/ids"
ok "the process's endpoint is the Zipkin service" \
	bash -c "curl -sf -H 'Authorization: Bearer s3cret' 'http://127.0.0.1:$HTTP/api/v2/services' | grep -q '\"producer\"'"
ok "agent spool empty (all acknowledged)" wait_for 30 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"
stop_agent; rc=$?
ok "agent exits 0" test $rc -eq 0

# --- wrong token: refused, nothing stored, spans kept in the spool -----------------
before=$(stored)
start_agent --token wrong
produce --count 200 --ids "$T_TMP/ids2"
ok "collector's refusal logged by the agent" \
	wait_for 30 grep -q "collector 127.0.0.1:$PORT: ERROR" "$T_TMP/agent.log"
ok "spans kept in the spool" wait_for 30 bash -c "ls '$STATE/spool' | grep -q batch"
ok "nothing stored" test "$(stored)" -eq "$before"
stop_agent
start_agent --token s3cret
ok "with the right token the spool drains" wait_for 30 stored_ge $((before + 200))
sleep 0.3
ok "all exactly once" stored_exactly_once "$T_TMP/ids" "$T_TMP/ids2"
stop_agent

# --- NACKs from the real collector ----------------------------------------------------
kill "$CPID"; wait "$CPID" 2>/dev/null
DB2=$T_TMP/nack.db
PORT2=$(free_port)
HTTP2=$(free_port)
start_nacking() {   # DB: a collector NACKing every 3rd batch of a connection
	FAY_WIRE_TEST_NACK_EVERY=3 "$FAY" collector --listen "127.0.0.1:$PORT2" \
		--http "127.0.0.1:$HTTP2" --db "$1" 2>>"$T_TMP/coll2.log" &
	C2=$!
	T_PIDS+=($C2)
	wait_for 10 curl -sf "http://127.0.0.1:$HTTP2/health"
}
ok "collector with the NACK test point up" start_nacking "$DB2"
CLIENT=$BUILD/tests/fay-wire-client
"$CLIENT" -a "127.0.0.1:$PORT2" -i 00000000000000000000000000000abc -s 1 -n 10 -m 5 -W 8 \
	send >"$T_TMP/nack.out" 2>&1
answers=$(head -4 "$T_TMP/nack.out" | awk '{printf "%s%s ", $1, $2}')
ok "wire client: ACK 1, ACK 2, NACK 3, then the connection closed ($answers)" \
	test "$answers" = "ack1 ack2 nack3 closed "
"$CLIENT" -i 00000000000000000000000000000abc -s 1 -n 10 -d "$DB2" check >"$T_TMP/nack.check"
ok "batches 4-8, sent behind the NACKed one, were not committed" \
	bash -c "[ \"\$(awk '\$2 > 0 {print \$1}' '$T_TMP/nack.check' | tr '\n' ' ')\" = '1 2 ' ]"
ok "collector logged the NACK and the close" grep -q "NACK, closing the connection" "$T_TMP/coll2.log"
kill "$C2"; wait "$C2" 2>/dev/null

DB=$T_TMP/nack-agent.db
ok "again, on an empty store" start_nacking "$DB"
rm -rf "$STATE"
PORT=$PORT2 start_agent
produce --count 4000 --threads 2 --rate 2000 --ids "$T_TMP/ids3"
ok "4000 spans through NACKs" wait_for 30 stored_ge 4000
sleep 0.5
ok "each exactly once" stored_exactly_once "$T_TMP/ids3"
ok "the agent saw NACKs and resent" agent_log_has "reconnecting to resend it"
stop_agent

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
