#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --tls-client-ca on every port (#10): with it, HTTP (query API, UI),
# OTLP/HTTP, OTLP/gRPC and the agent port each ask for a client
# certificate and refuse the handshake without one, or with one another CA
# signed; a client with the right certificate is served, and its token is
# still checked on top (401 without, 403 with the wrong scope).  Real
# clients: curl --cert, python's ssl, grpc-js, fay's wire client.
# --tls-client-ca-ports narrows it (agent only: HTTP clients without a
# certificate are served again); a bad list is refused with the reason.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/../lib/certs.bash"

mkcert ca - ""
mkcert server ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
mkcert client ca "extendedKeyUsage=clientAuth"
mkcert rogue - ""
mkcert stranger rogue "extendedKeyUsage=clientAuth"
ok "openssl made the certificates" test -s "$C/client.pem" -a -s "$C/stranger.pem"

printf 'rt read reader\nwt write writer\n' >"$T_TMP/tokens"
chmod 600 "$T_TMP/tokens"

coll_try --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" \
	--tls-client-ca-ports agent,smtp
ok "--tls-client-ca-ports with an unknown port: exit 2 naming it" \
	bash -c "[ $? = 2 ] && grep -q \"'smtp': not a port\" '$T_TMP/try.log'"
coll_try --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-client-ca-ports http
ok "--tls-client-ca-ports without --tls-client-ca: exit 1 saying so" \
	bash -c "[ $? = 1 ] && grep -q 'tls-client-ca-ports without --tls-client-ca' '$T_TMP/try.log'"

OP=$(free_port) GP=$(free_port)
coll_start "$T_TMP/c.db" --token-file "$T_TMP/tokens" --tls-cert "$C/server.pem" \
	--tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" \
	--otlp-http 127.0.0.1:$OP --otlp-grpc 127.0.0.1:$GP || true
URL=https://127.0.0.1:$HP
CURL=(curl -s --max-time 10 --cacert "$C/ca.pem")
ME=(--cert "$C/client.pem" --key "$C/client.key")
ok "the collector starts with a client CA on every port" \
	wait_for 10 "${CURL[@]}" "${ME[@]}" -f "$URL/health"

# ---- HTTP: curl ----
# curl's exit when the server ends the handshake: 35 (SSL connect), 55
# (send) or 56 (receive), depending on when the alert arrives
refused_rc() { case $1 in 35|55|56) return 0 ;; esac; return 1; }
"${CURL[@]}" -o /dev/null "$URL/health"
rc=$?
ok "curl without a certificate: the handshake is refused (curl exit $rc)" refused_rc $rc
"${CURL[@]}" --cert "$C/stranger.pem" --key "$C/stranger.key" -o /dev/null "$URL/health"
rc=$?
ok "curl with a certificate another CA signed: refused (exit $rc)" refused_rc $rc
# logged once the handshake has failed, after the alert curl exits on
ok "... and the collector logs why, with the peer" \
	wait_for 10 grep -q 'tls: 127.0.0.1: handshake refused: .*[Cc]ertificate' "$T_TMP/collector.log"
code=$("${CURL[@]}" "${ME[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer rt' "$URL/api/v2/services")
ok "curl with the client certificate and a read token: 200" [ "$code" = 200 ]
code=$("${CURL[@]}" "${ME[@]}" -o /dev/null -w '%{http_code}' "$URL/api/v2/services")
ok "... the certificate alone is not a token: 401" [ "$code" = 401 ]
code=$("${CURL[@]}" "${ME[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wt' "$URL/api/v2/services")
ok "... a write token on a read route: 403" [ "$code" = 403 ]

# ---- OTLP/HTTP: python's ssl ----
cat >"$T_TMP/py.py" <<'PY'
import http.client, ssl, sys
port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
if cert != "-":
    ctx.load_cert_chain(cert, key)
try:
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    c.request("POST", "/v1/traces", body=b"{}", headers={"Content-Type": "application/json",
                                                          "Authorization": "Bearer wt"})
    print("status", c.getresponse().status)
except (ssl.SSLError, OSError) as e:
    print("refused", type(e).__name__, e)
PY
out=$(python3 "$T_TMP/py.py" $OP "$C/ca.pem" - -)
ok "python ssl to OTLP/HTTP without a certificate: refused ($out)" grep -q '^refused' <<<"$out"
out=$(python3 "$T_TMP/py.py" $OP "$C/ca.pem" "$C/client.pem" "$C/client.key")
ok "python ssl to OTLP/HTTP with the certificate and a write token: 200" grep -qx 'status 200' <<<"$out"

# ---- OTLP/gRPC: grpc-js ----
if command -v node >/dev/null && [ -d "$TOP/tests/otlp/node_modules/@grpc" ]; then
	grpcauth() { node "$TOP/tests/otlp/otlp_client.js" grpcauth localhost:$GP - wt 2>&1; }
	out=$(OTLP_CA=$C/ca.pem grpcauth)
	ok "grpc-js without a certificate: UNAVAILABLE, no token check reached" \
		grep -q '"-":{"code":14.*"wt":{"code":14' <<<"$out"
	diag "$out"
	out=$(OTLP_CA=$C/ca.pem OTLP_CERT=$C/client.pem OTLP_KEY=$C/client.key grpcauth)
	ok "grpc-js with the certificate: no token UNAUTHENTICATED, a write token OK" \
		grep -q '"-":{"code":16.*"wt":{"code":0}' <<<"$out"
	diag "$out"
else
	pass "gRPC: skipped (no node or tests/otlp packages)"
	pass "gRPC: skipped"
fi

# ---- the agent port: fay's wire client ----
ID=dddddddddddddddddddddddddddddddd
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/ca.pem" -i $ID -t wt hello 2>&1)
ok "the agent port without a certificate: refused" bash -c "! grep -q welcome <<<'$out'"
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/ca.pem" -E "$C/client.pem" -Y "$C/client.key" -i $ID -t wt hello 2>&1)
ok "... with it and a write token: WELCOME" [ "$out" = "welcome last_seq=0" ]

# ---- fay's own HTTP clients (libcurl) ----
printf 'rt\n' >"$T_TMP/rt.tok"
chmod 600 "$T_TMP/rt.tok"
out=$("$FAY" sql --collector "$URL" --token rt --tls-ca "$C/ca.pem" 'SELECT 40 + 2 AS answer' 2>&1)
rc=$?
# the answer is a line of its own: the error names the port, which can
# hold "42" (it failed on https://127.0.0.1:42825)
ok "fay sql without a certificate: refused (exit $rc)" \
	bash -c "[ $rc -ne 0 ] && ! grep -Eq '^[[:space:]]*42[[:space:]]*\$' <<<'$out'"
diag "$out"
out=$("$FAY" sql --collector "$URL" --token rt --tls-ca "$C/ca.pem" --tls-cert "$C/client.pem" \
	--tls-key "$C/client.key" 'SELECT 40 + 2 AS answer' 2>&1)
ok "fay sql --tls-cert --tls-key: answered" grep -Eq '^[[:space:]]*42[[:space:]]*$' <<<"$out"
out=$(FAY_TLS_CERT=$C/client.pem FAY_TLS_KEY=$C/client.key "$FAY" traces list --server "$URL" \
	--tls-ca "$C/ca.pem" --token-file "$T_TMP/rt.tok" 2>&1)
rc=$?
ok "fay traces with FAY_TLS_CERT/FAY_TLS_KEY: answered (exit $rc)" test $rc = 0
diag "$out"
ok "the collector runs on" "${CURL[@]}" "${ME[@]}" -sf "$URL/health" -o /dev/null
coll_stop

# ---- --tls-client-ca-ports agent: HTTP clients need none ----
coll_start "$T_TMP/c2.db" --token-file "$T_TMP/tokens" --tls-cert "$C/server.pem" \
	--tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" --tls-client-ca-ports agent || true
URL=https://127.0.0.1:$HP
ok "--tls-client-ca-ports agent: curl without a certificate is served" \
	wait_for 10 "${CURL[@]}" -f "$URL/health"
out=$("$CLIENT" -a 127.0.0.1:$WP -C "$C/ca.pem" -i $ID -t wt hello 2>&1)
ok "... and the agent port still refuses a client without one" bash -c "! grep -q welcome <<<'$out'"
done_testing
