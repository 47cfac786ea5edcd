#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: blockstack --requests 200 at 1/1 sampling through a real
# agent and collector.  Exactly 200 traces are stored, each spanning the
# stack's services with one root, every parent present, every child inside
# its parent, and exactly the spans the workload recorded.
# Rings large enough (FAY_RING_KB) that a busy 2-core machine cannot make
# them overflow: with the default 1 MiB, the mapper's 200-request burst
# outran the agent's drain once under a load of about 5 (145 records
# counted lost to ring overwrite); this test is about the traces' shape,
# store_full_disk.sh and agent_kill.sh do the same.
export FAY_RING_KB=4096
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
e2e_setup

out=$("$BLOCKSTACK" --requests 200 --sample 1 2>"$T_TMP/blockstack.err")
rc=$?
diag "$out"
ok "blockstack --requests 200 succeeds" test $rc -eq 0
spans=$(bs_spans "$out")
ok "blockstack reports the spans it recorded" test -n "$spans"
ok "all spans reach the collector" wait_stored 30 "${spans:-1}"
check_traces --traces 200 --spans "${spans:--1}"
ok "the agent counted no loss" \
	bash -c "! grep -E 'gone.*lost:' '$T_TMP/agent.log' | grep -vE 'lost: 0 ring overwrite, 0 died mid-span, 0 no handle, 0 no ring, (0 no room, )?0 too big, 0 bad records, 0 nested'"
ok "the agent saw all five processes go" \
	test "$(grep -c ') gone' "$T_TMP/agent.log")" -eq 5
# The CLI reads what the checker read.
ok "fay traces ls lists them" \
	bash -c "'$FAY' traces ls --server '$E2E_URL' --limit 1000 | grep -c vm-client | grep -qx 200"
id=$("$FAY" traces ls --server "$E2E_URL" --service vm-client --span write --limit 1 --json |
     sed -n 's/.*"traceId": *"\([0-9a-f]*\)".*/\1/p' | head -n 1)
ok "fay traces show draws a write request" \
	bash -c "'$FAY' traces show --server '$E2E_URL' '$id' --ascii | grep -q 'blocker-2 write'"
e2e_logs_on_failure
done_testing
