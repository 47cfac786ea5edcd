# SPDX-License-Identifier: MIT
# Helpers for tests/integration/agent_*.sh (sourced after tests/lib/lib.sh):
# a fake collector, an agent, traced processes, exactly-once checks.
TOOLS=$BUILD/tests/bin
[ -x "$TOOLS/span_producer" ] && [ -x "$TOOLS/fake_collector" ] ||
	skip_all "agent test tools not built (make O=... agent-tests)"
[ -x "$FAY" ] || skip_all "no fay binary at $FAY"
SHM=$T_TMP/shm
STATE=$T_TMP/state
OUT=$T_TMP/out
mkdir -p "$SHM"
touch "$OUT"
# Rings large enough that nothing is overwritten while the agent is down.
export FAY_RINGS=8 FAY_RING_KB=4096 FAY_POOL=256
PORT=
COLL_PID=
AGENT_PID=

start_collector() {   # start_collector [fake_collector options]
	rm -f "$T_TMP/port"
	"$TOOLS/fake_collector" --port-file "$T_TMP/port" --out "$OUT" \
		--state "$T_TMP/cstate" --stats "$T_TMP/cstats" ${PORT:+--port $PORT} "$@" \
		2>>"$T_TMP/coll.log" &
	COLL_PID=$!
	T_PIDS+=($COLL_PID)
	wait_for 5 test -s "$T_TMP/port" || { echo "# collector did not start"; return 1; }
	PORT=$(cat "$T_TMP/port")
}

stop_collector() {
	[ -n "$COLL_PID" ] && kill "$COLL_PID" 2>/dev/null && wait "$COLL_PID" 2>/dev/null
	COLL_PID=
}

# AGENT_CONTAINERS: the agent's container option: --no-containers unless
# a test says otherwise (containers other tests run on the machine are not
# this test's)
start_agent() {       # start_agent [fay agent options]
	"$FAY" agent --collector "127.0.0.1:${PORT:-1}" --shm-dir "$SHM" --state-dir "$STATE" \
		--flush-interval 20ms --stats-interval 200ms ${AGENT_CONTAINERS:---no-containers} \
		"$@" 2>>"$T_TMP/agent.log" &
	AGENT_PID=$!
	T_PIDS+=($AGENT_PID)
}

stop_agent() {        # SIGTERM; returns the agent's exit status
	local rc=0
	kill "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null || rc=$?
	AGENT_PID=
	return $rc
}

kill9_agent() {
	kill -9 "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=
}

produce() {           # produce [span_producer options]: runs with FAY_SHM_DIR
	FAY_SHM_DIR=$SHM "$TOOLS/span_producer" "$@"
}

produce_bg() {        # the same in the background; its pid in PROD
	FAY_SHM_DIR=$SHM "$TOOLS/span_producer" "$@" &
	PROD=$!
	T_PIDS+=($PROD)
}

delivered() { wc -l <"$OUT"; }
delivered_ge() { [ "$(delivered)" -ge "$1" ]; }

# wait_delivered N [secs]: until the collector stored N spans.
wait_delivered() {
	wait_for "${2:-20}" delivered_ge "$1"
}

# exactly_once IDS...: every produced id delivered exactly once and
# nothing else delivered.  Prints the reason when not.
exactly_once() {
	local want got dups extra
	want=$(cat "$@" | sort -u | wc -l)
	got=$(awk '{print $2}' "$OUT" | sort | uniq | wc -l)
	dups=$(awk '{print $2}' "$OUT" | sort | uniq -d | wc -l)
	extra=$(awk '{print $2}' "$OUT" | sort -u | comm -13 <(cat "$@" | sort -u) - | wc -l)
	if [ "$got" -eq "$want" ] && [ "$dups" -eq 0 ] && [ "$extra" -eq 0 ] &&
	   [ "$(delivered)" -eq "$want" ]; then
		return 0
	fi
	echo "# produced $want, delivered $(delivered) lines, $got distinct, $dups duplicated, $extra unknown"
	return 1
}

# stat_of KEY: a number from the agent's stats.json ("key":N).
stat_of() {
	grep -o "\"$1\":[0-9]*" "$STATE/stats.json" 2>/dev/null | head -1 | cut -d: -f2
}

agent_log_has() { grep -q -- "$1" "$T_TMP/agent.log"; }

show_logs() {
	echo "# --- agent log"; sed 's/^/#   /' "$T_TMP/agent.log" | tail -${1:-30}
	echo "# --- collector log"; sed 's/^/#   /' "$T_TMP/coll.log" | tail -10
}
