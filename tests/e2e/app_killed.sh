#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: an application killed while it holds a span open.  blocker-1
# stops inside the span of its last operation (blockstack --hold) and is
# killed with SIGKILL.  Only that span is lost: the other 19 traces are
# complete, the last one lacks exactly its blocker-1 span, and the agent
# counts the loss ("1 died mid-span") for that process.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
e2e_setup

DIR=$T_TMP/bs
# 4k writes on 4k boundaries: one object, one blocker-1 span per request.
e2e_bs_background --requests 20 --sample 1 --size 4k --write-ratio 1 --dir "$DIR" \
	--hold blocker-1:20
ok "blocker-1 holds its 20th span open" wait_for 20 test -s "$DIR/blocker-1.held"
pid=$(cat "$DIR/blocker-1.held" 2>/dev/null)
diag "blocker-1 is pid $pid"
ok "its span is open in the shm pool while it waits" kill -0 "${pid:-0}"
e2e_kill9 "${pid:-0}" ; kill -KILL "${pid:-0}" 2>/dev/null
wait "$BS"
rc=$?
diag "$(cat "$T_TMP/blockstack.out")"
ok "blockstack reports the failure (exit 1)" test $rc -eq 1
ok "and names the killed role" grep -q 'blocker-1 (pid .*) was killed by signal 9' "$T_TMP/blockstack.err"
ok "the agent counts exactly one span lost for blocker-1" \
	wait_for 10 grep -qE "process $pid \\(blocker-1\\) gone.*lost: [0-9]+ ring overwrite, 1 died mid-span" "$T_TMP/agent.log"
# 20 writes x (vm-client 1 + composer 2 + mapper 3 + blockers 2), less one.
ok "the other spans reach the collector" wait_stored 30 159
check_traces --traces 20 --spans 159 --missing-blocker 1
e2e_logs_on_failure
done_testing
