#!/bin/bash
# SPDX-License-Identifier: MIT
# The multi-host harness (tests/lib/netns.bash) proved for real: four
# network namespaces on one switch, the real `fay collector` in one, a real
# `fay agent --collector IP:PORT --host hN` and a libfay workload in each
# of the three others.  Spans of all three hosts arrive, each agent is seen
# from its own address; pulling h2's cable makes h2 show down while h1 and
# h3 keep shipping; plugging it back brings h2 back with what it spooled.
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"

PRODUCER=$BUILD/tests/bin/span_producer
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$PRODUCER" ] || skip_all "no $PRODUCER (make builds it)"
command -v curl >/dev/null || skip_all "needs curl"
command -v jq >/dev/null || skip_all "needs jq"
ns_init
not() { ! "$@"; }

ns_hosts coll h1 h2 h3
pass "4 hosts on one switch: coll $(ns_ip coll), h1 $(ns_ip h1), h2 $(ns_ip h2), h3 $(ns_ip h3)"

# Own network stacks: the same fixed ports in every namespace.
# Off loopback a collector wants tokens: the agents write, the checks read.
printf 'agt write agents\nrdt read checks\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/agent.tok"
ok "collector up in its namespace" ns_collector coll "$T_TMP/collector.log" \
	--db "$T_TMP/fay.db" --token-file "$T_TMP/tokens"
ok "the collector's agent port is reachable from h1" ns_reach h1 coll 9410
ok "h1 is a stack of its own: nothing listens on its own port 9410" not ns_reach h1 h1 9410

declare -A APID
for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h/shm"
	ns_bg $h env FAY_SHM_DIR="$T_TMP/$h/shm" "$FAY" agent \
		--collector "$(ns_ip coll):9410" --host "$h" --state-dir "$T_TMP/$h/state" \
		--token-file "$T_TMP/agent.tok" --stats-interval 1s >"$T_TMP/$h/agent.log" 2>&1
	APID[$h]=$NS_PID
	# About 100 spans a second for the whole test.
	ns_bg $h env FAY_SHM_DIR="$T_TMP/$h/shm" "$PRODUCER" --count 100000 --rate 100 \
		--service "svc-$h"
done

hosts() { ns_run coll curl -sf -H "Authorization: Bearer rdt" http://127.0.0.1:9411/api/ui/hosts; }
# field HOST KEY: KEY of HOST's agent in /api/ui/hosts
field() { hosts | jq -r --arg h "$1" --arg k "$2" '.agents[] | select(.host == $h) | .[$k]'; }
spans() { local n; n=$(field "$1" spans); echo "${n:-0}"; }
up_is() { [ "$(field "$1" up)" = "$2" ]; }
shipping() { [ "$(spans "$1")" -gt 0 ] && up_is "$1" true; }
grew() { [ "$(spans "$1")" -gt "$2" ]; }
peer_is_own() { [[ "$(field "$1" peer)" == "$(ns_ip "$1"):"* ]]; }
has_services() {
	local s
	s=$(ns_run coll curl -sf -H "Authorization: Bearer rdt" http://127.0.0.1:9411/api/v2/services) &&
	jq -e 'index("svc-h1") and index("svc-h2") and index("svc-h3")' <<<"$s" >/dev/null
}

for h in h1 h2 h3; do
	ok "$h: up, its spans arrive" wait_for 30 shipping $h
	ok "$h: seen from its own address $(ns_ip $h)" peer_is_own $h
done
ok "three agents, no other" [ "$(hosts | jq '.agents | length')" = 3 ]
ok "the spans are stored: services svc-h1, svc-h2, svc-h3" wait_for 10 has_services

# Pull h2's cable.
ns_link h2 down
ok "h2's cable is out: the collector is unreachable from h2" not ns_reach h2 coll 9410
h1_before=$(spans h1)
h3_before=$(spans h3)
t0=$SECONDS
ok "h2 shows down (its connection gone) within 20 s" wait_for 20 up_is h2 false
diag "h2 down after $((SECONDS - t0)) s"
h2_down=$(spans h2)
ok "h1 still up" up_is h1 true
ok "h3 still up" up_is h3 true
ok "h1 kept shipping while h2 was out (from $h1_before spans)" wait_for 10 grew h1 "$h1_before"
ok "h3 kept shipping while h2 was out (from $h3_before spans)" wait_for 10 grew h3 "$h3_before"
ok "the h2 agent is still running (spooling)" kill -0 "${APID[h2]}"
sleep 2
ok "nothing of h2 arrived while its cable was out" [ "$(spans h2)" -eq "$h2_down" ]

# Plug it back: h2 reconnects and sends what it spooled meanwhile.
ns_link h2 up
ok "h2 back up after the cable is plugged in" wait_for 30 up_is h2 true
ok "h2's spans spooled during the outage arrive" wait_for 30 grew h2 "$h2_down"

if [ $T_FAILED -gt 0 ]; then
	for f in collector.log h1/agent.log h2/agent.log h3/agent.log; do
		diag "--- $f (last lines)"
		tail -8 "$T_TMP/$f" | sed 's/^/#   /'
	done
fi
done_testing
