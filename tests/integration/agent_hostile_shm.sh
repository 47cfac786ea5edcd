#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Hostile shm files (issue #10): a file shrunk under the agent's mapping
# does not kill it (SIGBUS is caught, the file reported and dropped; what
# was drained before is shipped); a sparse file announcing a 1 GiB ring is
# refused without being read; a file owned by another user than the
# process it names is refused (accepted with --shm-any-owner).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/agent_tools/lib.sh"

start_collector
start_agent
sleep 0.3

# 1. A traced process's file shrinks to its header while the agent maps it.
produce_bg --count 300 --ids "$T_TMP/ids1" --ready "$T_TMP/ready1" --hold "$T_TMP/go1"
ok "producer 1 recorded its spans" wait_for 30 test -e "$T_TMP/ready1"
ok "its 300 spans shipped" wait_delivered 300 30
f=$(ls "$SHM"/fay-"$PROD"-*.shm)
truncate -s 4096 "$f"
ok "the agent survives the shrunk file" \
	wait_for 30 grep -q "the file shrank under the agent" "$T_TMP/agent.log"
ok "agent still running" kill -0 "$AGENT_PID"
ok "stats: shrunk_files 1" wait_for 30 grep -q '"shrunk_files":1' "$STATE/stats.json"
touch "$T_TMP/go1"
wait "$PROD" 2>/dev/null

# 2. A sparse file whose header announces 2 rings of 1 GiB (not allocated).
# 3. A file owned by nobody that names a process running as root.
sleep 1000 & SLEEPER=$!; T_PIDS+=($SLEEPER)
python3 - "$SHM" "$SLEEPER" <<'PY'
import os, struct, sys
d, sleeper = sys.argv[1], int(sys.argv[2])
HDR, SLOT, CTL = 4096, 64, 128
# Each file is made whole (size, owner) under a name the agent ignores and
# then renamed into place: the agent's scan must never see it half made (a
# scan between the write and the chown saw a file of root's, and took it).
def put(pid, inst, nrings, slots, npool=4, stride=1024, owner=None):
    pool_off = HDR
    rings_off = pool_off + npool * stride
    ring_stride = CTL + slots * SLOT
    size = rings_off + nrings * ring_stride
    b = struct.pack('<QIIQQIIQQQIIQII', 0x314d48535f594146, 1, HDR, size, inst, pid, 1, 0,
                    rings_off, ring_stride, nrings, slots, pool_off, npool, stride)
    b += b'hostile'.ljust(64, b'\0') + b'127.0.0.1'.ljust(48, b'\0')
    path = os.path.join(d, 'fay-%d-%016x.shm' % (pid, inst))
    with open(path + '.tmp', 'wb') as f:
        f.write(b)
        f.truncate(size)           # sparse: only the header page exists
    if owner is not None:
        os.chown(path + '.tmp', owner, owner)
    os.rename(path + '.tmp', path)
put(910000, 0x300, 2, 1 << 24)
put(sleeper, 0x301, 1, 64, owner=65534)
PY
ok "a 1 GiB ring refused, naming the limit" \
	wait_for 30 grep -q "fay-910000-.*ring_slots is 16777216, want a power of two in 2..1048576" \
	"$T_TMP/agent.log"
ok "a file of another user than its process refused" \
	wait_for 30 grep -q "fay-$SLEEPER-.*owned by uid 65534, but process $SLEEPER runs as uid 0" \
	"$T_TMP/agent.log"
ok "agent still running" kill -0 "$AGENT_PID"

# A good process is still served, exactly once.
produce --count 500 --ids "$T_TMP/ids2"
ok "a good process is still served" wait_delivered 800 30
ok "exactly once (both producers)" exactly_once "$T_TMP/ids1" "$T_TMP/ids2"
stop_agent
ok "agent exit 0" test $? -eq 0

# --shm-any-owner: the same file is read.
start_agent --shm-any-owner
ok "--shm-any-owner reads it" \
	wait_for 30 grep -q "process $SLEEPER (hostile) seen" "$T_TMP/agent.log"
stop_agent

[ $T_FAILED -eq 0 ] || show_logs 30
done_testing
