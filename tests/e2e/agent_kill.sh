#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: the agent is killed with SIGKILL twice while blockstack
# runs, and restarted on the same state directory.  It resumes every ring
# where its spool ends: every span that was in the rings is stored, once.
# The workload is paced and the rings large enough (FAY_RING_KB) to hold
# what it writes while no agent drains them: a loss here is the agent's.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
export FAY_RING_KB=4096
e2e_setup

e2e_bs_background --requests 2000 --rate 200 --sample 1 --size 8k
for round in 1 2; do
	sleep 2
	e2e_kill9 "$AGENT_PID"
	diag "round $round: agent killed with $(ls "$E2E_STATE/spool" 2>/dev/null | wc -l) batches spooled, $(stored) (traces spans) stored"
	sleep 0.5
	ok "agent restarts on the same state dir (round $round)" e2e_agent
done
e2e_bs_finish "the agent comes and goes" 2000
e2e_logs_on_failure
done_testing
