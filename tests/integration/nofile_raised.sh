#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent keeps a pidfd per traced process and spool files, the
# collector a descriptor per connection: both raise their soft open-file
# limit to the hard one at start (#10: the agent never did, and systemd's
# default soft limit is 1,024).  Started under a soft limit of 1024 and a
# hard one of 8192, each runs with 8192 (its /proc/PID/limits).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
soft_of() { awk '/^Max open files/ { print $4 }' "/proc/$1/limits" 2>/dev/null; }
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 8192 ] || skip_all "the hard open-file limit is $hard (< 8192)"
# collector_lib's coll_start, under the low soft limit
ulimit -Sn 1024
ulimit -Hn 8192
coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
ok "the collector started under 1024/8192 runs with a soft limit of 8192 (got $(soft_of "$CPID"))" \
	test "$(soft_of "$CPID")" = 8192
mkdir -p "$T_TMP/state" "$T_TMP/shm"
"$FAY" agent --collector 127.0.0.1:$WP --state-dir "$T_TMP/state" --shm-dir "$T_TMP/shm" \
	--host nofile-host >"$T_TMP/agent.log" 2>&1 &
APID=$!; T_PIDS+=($APID)
up() { [ -s "$T_TMP/state/agent_id" ]; }
ok "the agent starts" wait_for 30 up
# polled: the agent writes agent_id in its setup and raises the limit
# after it, so a reading right after agent_id appeared could see 1024
# (with the raise delayed 2 s by strace -e inject it did: "got 1024")
raised() { [ "$(soft_of "$APID")" = 8192 ]; }
wait_for 30 raised
ok "the agent started under 1024/8192 runs with a soft limit of 8192 (got $(soft_of "$APID"))" \
	test "$(soft_of "$APID")" = 8192
ok "and this shell's soft limit was 1024 (the test's premise)" test "$(ulimit -Sn)" = 1024
done_testing
