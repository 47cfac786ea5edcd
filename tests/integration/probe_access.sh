#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Who may probe through a collector without tokens (#20): a root collector
# on loopback, no token file, asked by nobody (setpriv, no capability)
# and by root.  nobody's POST /api/query of every kernel-wide source,
# its cluster query (fay query --cluster), its standing queries (POST and
# DELETE /api/queries) and root's process are refused with the reason,
# each decision logged; nobody's own process is probed (its 200 calls
# counted exactly); root's queries run; reads and writes of spans stay
# open to nobody; the probe token (DB.probe-token, 0600) lets its holder
# probe everything, and nobody cannot read it; --probe-group lets a
# group's members probe everything.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/unpriv_lib.bash"
unpriv_workloads pa

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
LOG=$T_TMP/collector.log

# post_as WHO OUT BODY [CURL-ARGS...]: POST /api/query as WHO (root or
# $U), the body to OUT (opened by this root shell: nobody cannot write
# here); prints the HTTP status
post_as() {
	local who=$1 out=$2 body=$3 run=()
	shift 3
	[ "$who" = root ] || run=(as "")
	"${run[@]}" curl -s -w '\n%{http_code}' -X POST --data-binary "$body" "$@" \
		"$URL/api/query" >"$out"
	tail -n 1 "$out"
	sed -i '$d' "$out"
}
# curl_as OUT CURL-ARGS...: curl as $U, the body to OUT; the status
curl_as() {
	local out=$1
	shift
	as "" curl -s -w '\n%{http_code}' "$@" >"$out"
	tail -n 1 "$out"
	sed -i '$d' "$out"
}
refused() { # NAME STATUS OUT PATTERN
	ok "$1: refused 403" test "$2" = 403
	ok "... saying why" grep -q "$4" "$3"
	diag "$(head -c 400 "$3")"
}

# ---- nobody: kernel-wide sources, cluster and standing queries ----
st=$(post_as "$U" "$T_TMP/r1" 'from s in syscall("*") select count() for 1s')
refused "nobody: syscall(\"*\")" "$st" "$T_TMP/r1" \
	"refused for uid $UID_U ($U): a syscall source sees every process"
st=$(post_as "$U" "$T_TMP/r2" 'from t in tracepoint("sched:sched_switch") select count() for 1s')
refused "nobody: a tracepoint" "$st" "$T_TMP/r2" "a tracepoint source sees every process"
st=$(post_as "$U" "$T_TMP/r3" 'from p in profile(99) select count() for 1s')
refused "nobody: profile" "$st" "$T_TMP/r3" "a profile source sees every process"
st=$(post_as "$U" "$T_TMP/r4" 'from s in cluster.syscall("getppid") select count() for 1s')
refused "nobody: a cluster query over HTTP" "$st" "$T_TMP/r4" \
	"a cluster query loads probes on every agent"
out=$(as "" "$D/fay" query --cluster "$URL" 'from s in cluster.syscall("getppid") select count() for 1s' 2>&1)
rc=$?
ok "nobody: fay query --cluster: refused (exit $rc)" test $rc -ne 0
ok "... saying why" grep -q "a cluster query loads probes on every agent" <<<"$out"
diag "$out"
st=$(curl_as "$T_TMP/r5" -X POST -H 'Content-Type: application/json' \
	--data '{"query":"from s in cluster.syscall(\"read\") select count()"}' "$URL/api/queries")
refused "nobody: POST /api/queries (a standing query)" "$st" "$T_TMP/r5" \
	"POST /api/queries refused for uid $UID_U ($U): a standing query runs on every agent"
st=$(curl_as "$T_TMP/r6" -X DELETE "$URL/api/queries/1")
refused "nobody: DELETE /api/queries/1" "$st" "$T_TMP/r6" "DELETE /api/queries/1 refused"
ok "each refusal is logged" grep -q "probe access: POST /api/query by uid $UID_U ($U): POST /api/query refused" "$LOG"

# ---- nobody: root's process refused, its own probed ----
held_pair
st=$(post_as "$U" "$T_TMP/r7" "from f in process($RPID).function(\"fay_work_fn\") select count()")
ok "nobody: root's process: the query fails" grep -q '"type":"error"' "$T_TMP/r7"
ok "... saying why" grep -q "process $RPID: the process belongs to uid 0 (root).*asked by uid $UID_U" "$T_TMP/r7"
diag "status $st: $(head -c 400 "$T_TMP/r7")"
as "" curl -s -N -X POST --data-binary \
	"from f in process($UPID).function(\"fay_work_fn\") select { n: count() } for 10s" \
	"$URL/api/query" >"$T_TMP/own" 2>&1 &
QP=$!; T_PIDS+=($QP)
ok "nobody: its own process: the probe is attached" \
	wait_for 30 grep -q '"type":"progress","attached":1' "$T_TMP/own"
touch "$D/go.user"
wait_for 40 grep -q '"type":"end"' "$T_TMP/own"
ok "... and its 200 calls counted" grep -q '"rows":\[\[200\]\]' "$T_TMP/own"
diag "$(head -c 400 "$T_TMP/own")"
ok "... the decision logged" grep -q "probe access: POST /api/query by uid $UID_U ($U): allowed, its own processes only" "$LOG"
touch "$D/go.root"

# ---- root: allowed ----
st=$(post_as root "$T_TMP/r8" "from s in syscall(\"getppid\") where s.comm == \"$UN\" select { n: count() } for 3s" -N)
ok "root: a syscall query runs (status $st)" grep -q '"type":"end"' "$T_TMP/r8"
ok "... without an error" test "$(grep -c '"type":"error"' "$T_TMP/r8")" = 0
diag "$(head -c 300 "$T_TMP/r8")"
ok "... logged" grep -q "probe access: POST /api/query by uid 0 (root): allowed" "$LOG"

# ---- reads and writes of spans stay open ----
ok "nobody: GET /api/v2/services: 200" test "$(as "" curl -s -o /dev/null -w '%{http_code}' "$URL/api/v2/services")" = 200
SPAN='[{"traceId":"00000000000000000000000000000abc","id":"0000000000000abc","name":"x","timestamp":1700000000000000,"duration":5,"localEndpoint":{"serviceName":"pa"}}]'
ok "nobody: POST /api/v2/spans: 202" test "$(as "" curl -s -o /dev/null -w '%{http_code}' \
	-H 'Content-Type: application/json' --data "$SPAN" "$URL/api/v2/spans")" = 202
ok "nobody: GET /metrics: 200" test "$(as "" curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")" = 200

# ---- the probe token ----
TF=$T_TMP/c.db.probe-token
ok "the probe token file is mode 600" test "$(stat -c %a "$TF")" = 600
ok "nobody cannot read it" bash -c "! setpriv --reuid $U --regid nogroup --clear-groups cat '$TF' 2>/dev/null"
TOK=$(cat "$TF")
st=$(post_as "$U" "$T_TMP/r9" 'from s in syscall("getppid") select count() for 1s' -N \
	-H "Authorization: Bearer $TOK")
ok "nobody with the probe token: a syscall query runs (status $st)" grep -q '"type":"end"' "$T_TMP/r9"
diag "$(head -c 300 "$T_TMP/r9")"
st=$(post_as "$U" "$T_TMP/r10" 'from s in syscall("getppid") select count() for 1s' \
	-H "Authorization: Bearer ${TOK%?}$([ "${TOK: -1}" = 0 ] && echo 1 || echo 0)")
refused "nobody with a wrong token" "$st" "$T_TMP/r10" "a syscall source sees every process"
coll_stop

# ---- --probe-group ----
coll_start "$T_TMP/g.db" --probe-group nogroup || fail "a collector with --probe-group starts"
st=$(post_as "$U" "$T_TMP/r11" 'from s in syscall("getppid") select count() for 1s' -N)
ok "--probe-group nogroup: nobody's syscall query runs (status $st)" grep -q '"type":"end"' "$T_TMP/r11"
diag "$(head -c 300 "$T_TMP/r11")"
ok "... logged" grep -q "by uid $UID_U ($U), of group nogroup (--probe-group): allowed" "$LOG"
coll_stop
coll_try --probe-group no-such-group-$$
ok "--probe-group of no group: refused at start" grep -q "no-such-group-$$: no such group" "$T_TMP/try.log"
done_testing
