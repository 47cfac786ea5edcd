#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SIGHUP reloads the collector's --token-file and TLS files without a
# restart (#10): a rotated token (the old one 401 after the HUP, the new
# one 200), a rotated server certificate (new handshakes see the new
# serial, a connection opened before keeps its session and is served); a
# broken certificate file or a token file readable by everyone is refused
# with the reason in the log and the previous configuration goes on.  The
# agent too: its rotated token file is sent in the HELLO after a
# reconnect, a broken CA file on its SIGHUP is refused and logged.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/../lib/certs.bash"

mkcert ca - ""
mkcert s1 ca "subjectAltName=IP:127.0.0.1"
mkcert s2 ca "subjectAltName=IP:127.0.0.1"
serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }
S1=$(serial "$C/s1.pem") S2=$(serial "$C/s2.pem")
ok "two server certificates with their own serials" test -n "$S1" -a "$S1" != "$S2"
cp "$C/s1.pem" "$C/server.pem"
cp "$C/s1.key" "$C/server.key"
chmod 600 "$C/server.key"
printf 'old-secret read reader\n' >"$T_TMP/tokens"
chmod 600 "$T_TMP/tokens"

coll_start "$T_TMP/c.db" --token-file "$T_TMP/tokens" --tls-cert "$C/server.pem" \
	--tls-key "$C/server.key" || true
URL=https://127.0.0.1:$HP
CURL=(curl -s --max-time 10 --cacert "$C/ca.pem")
ok "the collector starts with TLS and a token file" wait_for 30 "${CURL[@]}" -f "$URL/health"
code() { "${CURL[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$URL/api/v2/services"; }
# the serial of the certificate a new handshake gets
seen() { echo | timeout 5 openssl s_client -connect 127.0.0.1:$HP 2>/dev/null | openssl x509 -noout -serial | cut -d= -f2; }
ok "before: the old token 200" test "$(code old-secret)" = 200
ok "before: handshakes see the first certificate" test "$(seen)" = "$S1"

# a client that keeps its connection across the reload
cat >"$T_TMP/keep.py" <<'PY'
import http.client, os, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ctx, timeout=10)
c.request("GET", "/health"); r = c.getresponse(); r.read()
print("before", r.status, c.sock.getpeercert()["serialNumber"], flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.1)
c.request("GET", "/health"); r = c.getresponse(); r.read()
print("after", r.status, c.sock.getpeercert()["serialNumber"], flush=True)
PY
: >"$T_TMP/keep.out"
python3 "$T_TMP/keep.py" $HP "$C/ca.pem" "$T_TMP/go" >"$T_TMP/keep.out" 2>&1 &
KPID=$!
T_PIDS+=($KPID)
ok "a client holds a connection open" wait_for 30 grep -q "^before 200" "$T_TMP/keep.out"

# rotate both
printf 'new-secret read reader\n' >"$T_TMP/tokens"
cp "$C/s2.pem" "$C/server.pem"
cp "$C/s2.key" "$C/server.key"
kill -HUP "$CPID"
ok "SIGHUP: the log says the token file was read again" \
	wait_for 30 grep -q "reload: --token-file $T_TMP/tokens: 1 tokens" "$T_TMP/collector.log"
# the TLS line comes after the token line, once the files are read (about
# 0.5 ms later): waited for, not read once
ok "... and the TLS files" \
	wait_for 30 grep -q "reload: TLS: $C/server.pem read again" "$T_TMP/collector.log"
ok "after: the old token is refused (401)" test "$(code old-secret)" = 401
ok "after: the new token 200" test "$(code new-secret)" = 200
ok "after: new handshakes see the new certificate" test "$(seen)" = "$S2"
touch "$T_TMP/go"
wait $KPID
ok "the connection opened before is served on, with its session's certificate" \
	grep -qx "after 200 $S1" "$T_TMP/keep.out"
diag "$(cat "$T_TMP/keep.out")"
ok "the collector is the same process" kill -0 "$CPID"

# broken files: refused, the old configuration stays
printf 'not a certificate\n' >"$C/server.pem"
chmod 644 "$T_TMP/tokens"
printf 'third-secret read reader\n' >"$T_TMP/tokens"
kill -HUP "$CPID"
ok "a broken certificate file: refused, the log says why" \
	wait_for 30 grep -q "reload: TLS files refused, new handshakes go on with the old ones: .*server.pem" \
	"$T_TMP/collector.log"
ok "a token file readable by every user: refused, the log names its mode" \
	grep -q "reload: --token-file refused, the tokens stay as they were: .*tokens.*mode 0644" \
	"$T_TMP/collector.log"
ok "handshakes go on with the certificate read before" test "$(seen)" = "$S2"
ok "the tokens read before still hold: new-secret 200" test "$(code new-secret)" = 200
ok "... and the refused file's token is not taken (401)" test "$(code third-secret)" = 401
ok "the collector runs on" "${CURL[@]}" -sf "$URL/health" -o /dev/null

# ---- the agent: its token file and TLS files on SIGHUP ----
# a fresh collector on fixed ports (restarted below to make the agent
# reconnect), the agent's token named so that its secret can change
cp "$C/s2.pem" "$C/server.pem"
coll_stop
chmod 600 "$T_TMP/tokens"
printf 'rt read reader\nagent-old write the-agent\n' >"$T_TMP/tokens"
WP=$(free_port) HP=$(free_port)
URL=https://127.0.0.1:$HP
coll_run() {
	"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off \
		--otlp-grpc off --db "$T_TMP/a.db" --token-file "$T_TMP/tokens" \
		--tls-cert "$C/server.pem" --tls-key "$C/server.key" >>"$T_TMP/collector.log" 2>&1 &
	CPID=$!
	T_PIDS+=($CPID)
	wait_for 30 "${CURL[@]}" -f "$URL/health"
}
coll_run
printf 'agent-old\n' >"$T_TMP/agent.tok"
chmod 600 "$T_TMP/agent.tok"
mkdir -p "$T_TMP/ag"
"$FAY" agent --collector 127.0.0.1:$WP --host reloaded --shm-dir "$T_TMP/ag" --state-dir "$T_TMP/ag" \
	--token-file "$T_TMP/agent.tok" --tls-ca "$C/ca.pem" >>"$T_TMP/agent.log" 2>&1 &
APID=$!
T_PIDS+=($APID)
connected() { grep -c "agent .* (reloaded) connected" "$T_TMP/collector.log"; }
connected_ge() { [ "$(connected)" -ge "$1" ]; }
ok "an agent with a token file and TLS connects" wait_for 15 connected_ge 1
# rotate the agent's secret on both sides, then make it reconnect
printf 'rt read reader\nagent-new write the-agent\n' >"$T_TMP/tokens"
printf 'agent-new\n' >"$T_TMP/agent.tok"
kill -HUP "$CPID" "$APID"
ok "the agent logs that it read its token file again" \
	wait_for 30 grep -q "reload: --token-file $T_TMP/agent.tok read again" "$T_TMP/agent.log"
ok "... and its TLS files" wait_for 30 grep -q "reload: TLS files read again" "$T_TMP/agent.log"
ok "the agent is the same process" kill -0 "$APID"
n=$(connected)
kill "$CPID"
wait "$CPID" 2>/dev/null
coll_run
ok "after the collector restarts the agent says HELLO with its new token: connected" \
	wait_for 20 connected_ge $((n + 1))
ok "... and no HELLO was refused for its token" \
	bash -c "! grep -q 'unknown token\|not a known token' '$T_TMP/agent.log'"
printf 'not a certificate\n' >"$T_TMP/bad.pem"
cp "$T_TMP/bad.pem" "$C/ca.pem"
kill -HUP "$APID"
ok "a broken CA file on the agent's SIGHUP: refused, the log says why" \
	wait_for 30 grep -q "reload: TLS files refused, new connections go on with the old ones: .*ca.pem" \
	"$T_TMP/agent.log"
ok "the agent runs on" kill -0 "$APID"
done_testing
