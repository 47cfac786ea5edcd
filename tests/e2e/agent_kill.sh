#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: the agent is killed with SIGKILL twice while blockstack
# runs, and restarted on the same state directory.  It resumes every ring
# where its spool ends: every span that was in the rings is stored, once.
# The workload is paced and the rings large enough (FAY_RING_KB) to hold
# what it writes while no agent drains them: a loss here is the agent's.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
e2e_need
e2e_ports
export FAY_RING_KB=4096

ok "collector starts" e2e_collector
ok "agent starts" e2e_agent

"$BLOCKSTACK" --requests 2000 --rate 200 --sample 1 --size 8k >"$T_TMP/blockstack.out" \
	2>"$T_TMP/blockstack.err" &
BS=$!
T_PIDS+=("$BS")
for round in 1 2; do
	sleep 2
	e2e_kill9 "$AGENT_PID"
	diag "round $round: agent killed with $(ls "$E2E_STATE/spool" 2>/dev/null | wc -l) batches spooled, $(stored) (traces spans) stored"
	sleep 0.5
	ok "agent restarts on the same state dir (round $round)" e2e_agent
done
wait "$BS"
rc=$?
out=$(cat "$T_TMP/blockstack.out")
diag "$out"
ok "blockstack succeeds while the agent comes and goes" test $rc -eq 0
spans=$(bs_spans "$out")
ok "all spans reach the collector" wait_stored 60 "${spans:-1}"
check_traces --traces 2000 --spans "${spans:--1}"
ok "no ring overwrote records" \
	bash -c "! grep -E 'gone.*lost:' '$T_TMP/agent.log' | grep -v 'lost: 0 ring overwrite'"
e2e_logs_on_failure
done_testing
