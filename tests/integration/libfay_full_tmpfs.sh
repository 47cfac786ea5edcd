#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A full tmpfs under FAY_SHM_DIR never kills the traced application
# (issue #10): libfay reserves the pages of its shm file before touching
# them.  With no room for the header and pool, fay_init() fails with
# ENOSPC and the application runs on; with room for those but not for a
# ring, every span is counted in lost_no_room and the agent reports them
# exactly; once there is room, spans are recorded again.
# Before the fix the producers died of SIGBUS (exit 135).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/agent_tools/lib.sh"

# A 1 MiB tmpfs of our own as the shm directory.
mount -t tmpfs -o size=1m,mode=0700 fay-test-shm "$SHM" ||
	skip_all "cannot mount a tmpfs on $SHM"
trap 'kill $AGENT_PID $COLL_PID 2>/dev/null; wait 2>/dev/null; umount "$SHM"; t_cleanup' EXIT

# 1. No room at all: the header and pool cannot be reserved.
dd if=/dev/zero of="$SHM/filler" bs=64k count=64 2>/dev/null   # fills it
FAY_POOL=16 produce --count 500 --keep-going 2>"$T_TMP/p1.err"
rc=$?
ok "tmpfs full: the application runs to the end (exit $rc, not SIGBUS)" test $rc -eq 0
ok "fay_init() says why (ENOSPC)" grep -q "fay_init: No space left on device" "$T_TMP/p1.err"
ok "no file left behind" bash -c "! ls '$SHM' | grep -q '^fay-\|^\.fay-tmp'"
rm -f "$SHM/filler"

# 2. Room for the header and pool (20 KiB) but not for a 4 MiB ring.
start_collector
start_agent
# the agent runs (its first stats written) before the producer starts: a
# fixed sleep 0.3 was this wait
wait_for 30 test -s "$STATE/stats.json"
FAY_POOL=16 FAY_RINGS=2 FAY_RING_KB=4096 produce --count 700 --threads 2 2>"$T_TMP/p2.err"
rc=$?
ok "no room for a ring: the application runs to the end (exit $rc)" test $rc -eq 0
# (deadlines of 30 s, not 3-5 s: the agent's scan, drain and stats on a
# loaded machine)
ok "every span counted lost for no room (700)" \
	wait_for 30 grep -q '"no_room":700' "$STATE/stats.json"
ok "... and nothing else lost or shipped" \
	bash -c "grep -q '\"no_ring\":0' '$STATE/stats.json' && test \$(wc -l <'$OUT') -eq 0"
ok "the agent's log names the reason" \
	wait_for 30 grep -q "0 no ring, 700 no room" "$T_TMP/agent.log"

# 3. Rings that fit: recorded and shipped exactly once.
FAY_POOL=16 FAY_RINGS=2 FAY_RING_KB=128 produce --count 600 --ids "$T_TMP/ids" 2>"$T_TMP/p3.err"
ok "small rings fit: exit 0" test $? -eq 0
ok "every span delivered" wait_delivered 600 30
ok "exactly once" exactly_once "$T_TMP/ids"
ok "agent still running" kill -0 "$AGENT_PID"
stop_agent
ok "agent exit 0" test $? -eq 0

[ $T_FAILED -eq 0 ] || { cat "$T_TMP"/p*.err; show_logs 30; }
done_testing
