# SPDX-License-Identifier: MIT
# Helpers for the end-to-end tests (tests/e2e/*.sh): a private collector
# (free ports, temp db) and agent (temp state dir, private FAY_SHM_DIR),
# the blockstack workload, and the trace checker.  Source it after
# tests/lib/lib.sh.  Everything started here is stopped by t_cleanup.
E2E_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BLOCKSTACK=${BLOCKSTACK:-$BUILD/blockstack}
E2E_SHM=$T_TMP/shm
E2E_STATE=$T_TMP/agent
E2E_DB=$T_TMP/fay.db
COLLECTOR_PID=
AGENT_PID=
mkdir -p "$E2E_SHM" "$E2E_STATE"
export FAY_SHM_DIR=$E2E_SHM
unset FAY_SAMPLE FAY_SERVICE FAY_DISABLE

e2e_need() {
	[ -x "$FAY" ] || skip_all "no $FAY (make all)"
	[ -x "$BLOCKSTACK" ] || skip_all "no $BLOCKSTACK (make examples)"
	command -v python3 >/dev/null || skip_all "needs python3"
	command -v curl >/dev/null || skip_all "needs curl"
	"$FAY" collector --help >/dev/null 2>&1 || skip_all "fay collector is not built in this version"
	"$FAY" agent --help >/dev/null 2>&1 || skip_all "fay agent is not built in this version"
}

e2e_ports() {
	E2E_WIRE=127.0.0.1:$(free_port)
	E2E_HTTP=127.0.0.1:$(free_port)
	E2E_URL=http://$E2E_HTTP
}

# Start the collector on E2E_WIRE / E2E_HTTP with E2E_DB; wait until it answers.
e2e_collector() {
	"$FAY" collector --listen "$E2E_WIRE" --http "$E2E_HTTP" --db "$E2E_DB" \
		>>"$T_TMP/collector.log" 2>&1 &
	COLLECTOR_PID=$!
	T_PIDS+=("$COLLECTOR_PID")
	wait_for 15 curl -sf "$E2E_URL/api/v2/services" || {
		diag "collector did not come up on $E2E_URL"; tail -n 20 "$T_TMP/collector.log" | sed 's/^/# /'
		return 1
	}
}

# Start the agent on E2E_SHM / E2E_STATE; wait until it runs.
e2e_agent() {
	"$FAY" agent --collector "$E2E_WIRE" --shm-dir "$E2E_SHM" \
		--state-dir "$E2E_STATE" "$@" >>"$T_TMP/agent.log" 2>&1 &
	AGENT_PID=$!
	T_PIDS+=("$AGENT_PID")
	wait_for 10 test -s "$E2E_STATE/agent_id" || {
		diag "agent did not start"; tail -n 20 "$T_TMP/agent.log" | sed 's/^/# /'
		return 1
	}
	sleep 0.2
	kill -0 "$AGENT_PID" 2>/dev/null
}

e2e_kill9() { # pid
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

# The number after "N spans recorded" in a blockstack summary line.
bs_spans() { sed -n 's/.* \([0-9][0-9]*\) spans recorded.*/\1/p' <<<"$1"; }

# stored: "traces spans" the collector holds.
stored() {
	curl -sf "$E2E_URL/api/v2/traces?limit=1000000&lookback=86400000" |
		python3 -c 'import json,sys; t=json.load(sys.stdin); print(len(t), sum(map(len,t)))'
}

# wait_stored SECONDS SPANS: until the collector holds SPANS spans and the
# count is stable for a second.
wait_stored() {
	local end=$((SECONDS + $1)) want=$2 t s last=-1
	while [ $SECONDS -lt $end ]; do
		read -r t s < <(stored || echo "0 0")
		if [ "$s" -ge "$want" ] && [ "$s" = "$last" ]; then
			return 0
		fi
		last=$s
		sleep 1
	done
	diag "collector holds $t traces, $s spans; waited for $want spans"
	return 1
}

# check_traces ARGS...: tests/e2e/lib/check_traces.py against the
# collector; its TAP lines join this test's count.
check_traces() {
	local out
	out=$(python3 "$E2E_LIB/check_traces.py" --url "$E2E_URL" --first $((T_N + 1)) "$@" 2>&1)
	echo "$out"
	T_N=$((T_N + $(grep -c -e '^ok ' -e '^not ok ' <<<"$out")))
	T_FAILED=$((T_FAILED + $(grep -c '^not ok ' <<<"$out")))
}

e2e_logs_on_failure() {
	if [ "$T_FAILED" -ne 0 ]; then
		for l in agent collector; do
			[ -f "$T_TMP/$l.log" ] || continue
			diag "--- $l.log (last lines)"
			tail -n 15 "$T_TMP/$l.log" | sed 's/^/#   /'
		done
	fi
}

# e2e_setup: skip without the programs; start a collector and an agent.
e2e_setup() {
	e2e_need
	e2e_ports
	ok "collector starts" e2e_collector
	ok "agent starts" e2e_agent
}

# e2e_bs_background ARGS...: blockstack in the background (pid in BS),
# output in $T_TMP/blockstack.{out,err}.
e2e_bs_background() {
	"$BLOCKSTACK" "$@" >"$T_TMP/blockstack.out" 2>"$T_TMP/blockstack.err" &
	BS=$!
	T_PIDS+=("$BS")
}

# e2e_bs_finish WHAT TRACES: wait for the background blockstack; it must
# succeed, every span it recorded must be stored, the traces check out,
# and no ring may have overwritten records.
e2e_bs_finish() {
	local rc out spans
	wait "$BS"
	rc=$?
	out=$(cat "$T_TMP/blockstack.out")
	diag "$out"
	ok "blockstack succeeds while $1" test $rc -eq 0
	spans=$(bs_spans "$out")
	ok "all spans reach the collector" wait_stored 60 "${spans:-1}"
	check_traces --traces "$2" --spans "${spans:--1}"
	ok "no ring overwrote records" e2e_no_ring_loss
}

# e2e_no_ring_loss: no process the agent saw go lost records to a ring
# overwrite (the agent's drain fell behind the workload: counted, and not
# the store's doing)
e2e_no_ring_loss() {
	! grep -E 'gone.*lost:' "$T_TMP/agent.log" | grep -v 'lost: 0 ring overwrite'
}
