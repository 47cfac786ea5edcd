#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# TLS on every port of the collector (issue #10 item 2), with certificates
# made here by openssl: a start with a bad configuration (key without
# certificate, missing file, a key that is not the certificate's, a key
# readable by everyone) is refused with the reason; curl over https with
# the CA (and refused without it); plaintext HTTP to the TLS port fails
# and the collector runs on; TLS 1.1 is refused on the HTTP and the agent
# port while 1.2 works; mutual TLS on the agent port: a real fay agent with
# its certificate ships, one without a certificate, one that trusts
# another CA and one speaking plaintext are turned away with the reason;
# OTLP/gRPC over TLS (grpc-js); a child collector under this one over
# mutual TLS (--parent-tls-ca); a cluster query through TLS and tokens
# end to end (fay query --cluster https://... --tls-ca --token-file).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/../lib/certs.bash"

mkcert ca - ""
mkcert rogue - ""
mkcert server ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
mkcert agent ca "extendedKeyUsage=clientAuth"
mkcert other ca "subjectAltName=DNS:other.example"
ok "openssl made the certificates" bash -c '[ -s "$1" ] && [ -s "$2" ]' _ "$C/server.pem" "$C/agent.pem"

printf 'rt read reader\nwt write writer\npt probe prober\nagt write the-agent\n' >"$T_TMP/tokens"
chmod 600 "$T_TMP/tokens"
coll_try --tls-key "$C/server.key"
ok "--tls-key without --tls-cert: exit 1 with the reason" \
	bash -c "[ $? = 1 ] && grep -q 'needs --tls-cert and --tls-key' '$T_TMP/try.log'"
coll_try --tls-cert "$C/nothere.pem" --tls-key "$C/server.key"
ok "a missing certificate file: exit 1 naming it" \
	bash -c "[ $? = 1 ] && grep -q 'nothere.pem: No such file' '$T_TMP/try.log'"
coll_try --tls-cert "$C/server.pem" --tls-key "$C/other.key"
ok "a key that is not the certificate's: exit 1 naming both" \
	bash -c "[ $? = 1 ] && grep -q 'server.pem with .*other.key: .*not match' '$T_TMP/try.log'"
chmod 644 "$C/other.key"
coll_try --tls-cert "$C/other.pem" --tls-key "$C/other.key"
ok "a key readable by every user: exit 1 naming the mode" \
	bash -c "[ $? = 1 ] && grep -q 'other.key: mode 0644' '$T_TMP/try.log'"
coll_try --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-client-ca "$C/nothere.pem"
ok "a missing client CA file: exit 1 naming it" \
	bash -c "[ $? = 1 ] && grep -q 'nothere.pem' '$T_TMP/try.log'"

GP=$(free_port) OP=$(free_port)
WP=$(free_port) HP=$(free_port)
tls_coll() {
	"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --db "$T_TMP/fay.db" \
		--token-file "$T_TMP/tokens" --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
		--tls-client-ca "$C/ca.pem" --tls-client-ca-ports agent \
		--otlp-grpc 127.0.0.1:$GP --otlp-http 127.0.0.1:$OP \
		>>"$T_TMP/collector.log" 2>&1 &
	CPID=$!
	T_PIDS+=($CPID)
}
tls_coll
URL=https://127.0.0.1:$HP
CURL=(curl -s --cacert "$C/ca.pem")
ok "collector with TLS on every port starts" wait_for 10 "${CURL[@]}" -f "$URL/health"
ok "the start line says TLS" grep -q "agents on 127.0.0.1:$WP (TLS), HTTP on https://" "$T_TMP/collector.log"
ok "curl over https with the CA and a read token: 200" \
	[ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer rt' "$URL/api/v2/services")" = 200 ]
curl -s -o /dev/null "$URL/health"
ok "curl without the CA: the certificate is refused (exit 60)" [ $? = 60 ]
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$HP/health")
ok "plaintext HTTP to the TLS port: no answer ($code), and the collector runs on" \
	bash -c "[ '$code' = 000 ] && '${CURL[0]}' -sf --cacert '$C/ca.pem' $URL/health >/dev/null"
ok "OTLP/HTTP over https with a write token: 200" \
	[ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wt' -H 'Content-Type: application/json' --data '{}' "https://127.0.0.1:$OP/v1/traces")" = 200 ]

# tls11 PORT: openssl's handshake with TLS 1.1 only (its own floor lowered)
proto() { echo | timeout 5 openssl s_client -connect "127.0.0.1:$1" "${@:2}" 2>&1 | grep -o 'Cipher is [^ ]*' | head -1; }
ok "TLS 1.1 to the HTTP port: refused" [ "$(proto $HP -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0')" = "Cipher is (NONE)" ]
ok "TLS 1.1 to the agent port: refused" [ "$(proto $WP -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0')" = "Cipher is (NONE)" ]
# logged once the handshake has failed, after the alert openssl exits on
ok "... the collector says why" \
	wait_for 10 grep -q 'handshake refused: A packet with illegal or unsupported version' "$T_TMP/collector.log"
ok "TLS 1.2 to the HTTP port: a cipher" bash -c "[ \"\$(echo | timeout 5 openssl s_client -connect 127.0.0.1:$HP -tls1_2 2>&1 | grep -o 'Cipher is [^ ]*' | head -1)\" != 'Cipher is (NONE)' ]"
ok "TLS 1.2 to the agent port with the agent's certificate: a cipher" \
	bash -c "[ \"\$(echo | timeout 5 openssl s_client -connect 127.0.0.1:$WP -tls1_2 -cert '$C/agent.pem' -key '$C/agent.key' 2>&1 | grep -o 'Cipher is [^ ]*' | head -1)\" != 'Cipher is (NONE)' ]"

# ---- the agent protocol through TLS (the test client) ----
ID=cccccccccccccccccccccccccccccccc
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/ca.pem" -E "$C/agent.pem" -Y "$C/agent.key" -i $ID -t agt hello 2>&1)
ok "HELLO over mutual TLS with the agent's token: WELCOME" [ "$out" = "welcome last_seq=0" ]
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/ca.pem" -E "$C/agent.pem" -Y "$C/agent.key" -i $ID -t rt hello 2>&1)
ok "... with a read token: ERROR naming the write scope" grep -q "error.*lacks the 'write' scope" <<<"$out"
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/rogue.pem" -E "$C/agent.pem" -Y "$C/agent.key" -i $ID -t agt hello 2>&1)
ok "... trusting another CA: the client refuses the collector's certificate" \
	grep -q 'TLS: The certificate is NOT trusted' <<<"$out"

# ---- agents --------------------------------------------------------------------
printf 'agt\n' >"$T_TMP/agent.tok" && chmod 600 "$T_TMP/agent.tok"
# agent NAME ARGS...: a fay agent as host NAME
agent() {
	local n=$1; shift
	mkdir -p "$T_TMP/$n"
	"$FAY" agent --collector 127.0.0.1:$WP --host "$n" --shm-dir "$T_TMP/$n" --state-dir "$T_TMP/$n" \
		--token-file "$T_TMP/agent.tok" --stats-interval 1s "$@" >>"$T_TMP/$n.log" 2>&1 &
	T_PIDS+=($!)
}
hosts() { "${CURL[@]}" -H 'Authorization: Bearer rt' "$URL/api/ui/hosts"; }
agent good --tls-ca "$C/ca.pem" --tls-cert "$C/agent.pem" --tls-key "$C/agent.key"
ok "an agent with TLS, its certificate and a token: connected" wait_for 30 bash -c "$(declare -f hosts); CURL=(${CURL[*]}); URL=$URL; hosts | grep -q '\"host\":\"good\"'"
agent nocert --tls-ca "$C/ca.pem"
agent rogue --tls-ca "$C/rogue.pem" --tls-cert "$C/agent.pem" --tls-key "$C/agent.key"
agent plain
ok "an agent without a certificate: refused (mutual TLS), the collector says so" \
	wait_for 10 grep -q 'handshake refused: .*[Cc]ertificate' "$T_TMP/collector.log"
ok "an agent that trusts another CA: refuses the collector, naming why" \
	wait_for 10 grep -q 'TLS: The certificate is NOT trusted. The certificate issuer is unknown.$' "$T_TMP/rogue.log"
ok "an agent speaking plaintext to the TLS port: its connection fails" \
	wait_for 10 grep -qi 'collector 127.0.0.1:.*\(closed\|reset\|refused\|broken\)' "$T_TMP/plain.log"
sleep 1
ok "none of the three is connected" bash -c "! ($(declare -f hosts); CURL=(${CURL[*]}); URL=$URL; hosts) | grep -q '\"host\":\"\(nocert\|rogue\|plain\)\"'"
ok "the collector runs on" "${CURL[@]}" -sf "$URL/health" -o /dev/null

# ---- a child collector under this one (--parent) over mutual TLS ----
"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) --otlp-http off \
	--otlp-grpc off --db "$T_TMP/child.db" --parent 127.0.0.1:$WP --host child1 --token agt \
	--parent-tls-ca "$C/ca.pem" --tls-cert "$C/agent.pem" --tls-key "$C/agent.key" \
	>>"$T_TMP/child.log" 2>&1 &
T_PIDS+=($!)
ok "a child collector with --parent-tls-ca: linked to its parent over TLS" \
	wait_for 30 bash -c "'${CURL[0]}' -s --cacert '$C/ca.pem' -H 'Authorization: Bearer rt' $URL/api/cluster/peers | grep -q '\"host\":\"child1\"'"

# ---- OTLP/gRPC over TLS ----
if command -v node >/dev/null && [ -d "$TOP/tests/otlp/node_modules/@grpc" ]; then
	OTLP_CA=$C/ca.pem node "$TOP/tests/otlp/otlp_client.js" grpcauth localhost:$GP - wt \
		>"$T_TMP/grpc.json" 2>"$T_TMP/grpc.err"
	ok "gRPC over TLS: no token UNAUTHENTICATED, a write token OK" \
		grep -q '"-":{"code":16.*"wt":{"code":0}' "$T_TMP/grpc.json"
else
	pass "gRPC over TLS: skipped (no node or tests/otlp packages)"
fi

# ---- the collector restarts: the agent comes back over TLS ----
n0=$(grep -c 'agent .* (good) connected' "$T_TMP/collector.log")
kill $CPID; wait $CPID 2>/dev/null
tls_coll
ok "after a restart of the collector the agent reconnects over TLS" \
	wait_for 20 bash -c "[ \$(grep -c 'agent .* (good) connected' '$T_TMP/collector.log') -gt $n0 ]"

# ---- a cluster query through TLS and tokens, end to end ----
if [ "$(id -u)" = 0 ]; then
	printf 'pt\n' >"$T_TMP/probe.tok" && chmod 600 "$T_TMP/probe.tok"
	ok "the agent's query connection came up over TLS" \
		wait_for 30 bash -c "'${CURL[0]}' -s --cacert '$C/ca.pem' -H 'Authorization: Bearer rt' $URL/api/cluster/peers | grep -q '\"host\":\"good\"'"
	( for i in $(seq 400); do /bin/true; done ) &
	timeout 30 "$FAY" query --cluster "$URL" --tls-ca "$C/ca.pem" --token-file "$T_TMP/probe.tok" \
		'from c in cluster.syscall("getppid") select { n: count() } for 2s' \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err"
	RC=$?
	ok "fay query --cluster https://... --tls-ca --token-file: answered by the agent (rc=$RC)" \
		bash -c "[ $RC = 0 ] && grep -q 'good: attached' '$T_TMP/q.err' && grep -qE '^ *[0-9]+$' '$T_TMP/q.out'"
	timeout 30 "$FAY" query --cluster "$URL" --token-file "$T_TMP/probe.tok" \
		'from c in cluster.syscall("getppid") select { n: count() } for 1s' >/dev/null 2>"$T_TMP/q2.err"
	ok "... and without --tls-ca the collector's certificate is refused" \
		bash -c "[ $? != 0 ] && grep -qi 'certificate' '$T_TMP/q2.err'"
else
	pass "cluster query through TLS: skipped (not root: no BPF)"
fi
ok "collector still up" "${CURL[@]}" -sf "$URL/health" -o /dev/null
done_testing
