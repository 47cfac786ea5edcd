#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An agent refuses a cluster query that arrives without the probe right
# (#20): a fake collector sends a QUERY without WIRE_QF_PROBE (as a
# collector before #20 would, or anything else that reached the agent's
# query connection): the agent answers QSTATUS failed with the reason,
# logs it, loads nothing, and keeps running; with the flag the same query
# is attached.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/agent_tools/lib.sh"
Q='from s in cluster.syscall("getppid") select count() for 2s'

start_collector --query "$Q" || { fail "fake collector starts"; done_testing; exit; }
start_agent --host probe-flag
refused() { grep -q "QSTATUS 1 2 refused: the query came without the probe scope" "$T_TMP/coll.log"; }
ok "a QUERY without the probe flag: the agent answers failed, saying why" wait_for 30 refused
diag "$(grep QSTATUS "$T_TMP/coll.log" | head -3)"
ok "... and logs it" grep -q "query 1 from .*: refused: the query came without the probe scope" "$T_TMP/agent.log"
ok "... and attaches nothing" bash -c "! grep -q 'QSTATUS 1 1' '$T_TMP/coll.log'"
ok "the agent is still running" kill -0 "$AGENT_PID"
stop_agent
stop_collector

: >"$T_TMP/coll.log"
PORT=
start_collector --query "$Q" --query-flags 1 || { fail "fake collector starts"; done_testing; exit; }
start_agent --host probe-flag
attached() { grep -q "QSTATUS 1 1" "$T_TMP/coll.log"; }
ok "with the probe flag: the query is attached" wait_for 30 attached
diag "$(grep QSTATUS "$T_TMP/coll.log" | head -3)"
stop_agent
done_testing
