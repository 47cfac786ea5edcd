#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: the collector is killed with SIGKILL twice while blockstack
# runs, and restarted on the same database.  The agent keeps spooling and
# resends what was not acknowledged: in the end every span the workload
# recorded is stored exactly once (no acknowledged span lost, none twice).
# Paced, and with rings large enough (FAY_RING_KB) that a busy 2-core
# machine cannot make them overflow: a loss here is the collector's.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
export FAY_RING_KB=4096
e2e_setup

e2e_bs_background --requests 3000 --rate 300 --sample 1 --size 8k
# Records this collector process committed (its /metrics counter).
committed() {
	curl -sf "$E2E_URL/metrics" | sed -n 's/^fay_collector_spans_stored_total \([0-9]*\)$/\1/p'
}
for round in 1 2; do
	sleep 1
	# Only kill while spans are flowing: this collector stored some.
	wait_for 10 bash -c "[ \"\$(curl -sf '$E2E_URL/metrics' | sed -n 's/^fay_collector_spans_stored_total //p')\" -gt 0 ]"
	before=$(committed)
	e2e_kill9 "$COLLECTOR_PID"
	diag "round $round: collector killed after committing ${before:-?} records"
	sleep 1
	ok "collector restarts on the same db (round $round)" e2e_collector
done
e2e_bs_finish "the collector comes and goes" 3000
ok "the agent reconnected" test "$(grep -c 'connected' "$T_TMP/agent.log")" -ge 3
e2e_logs_on_failure
done_testing
