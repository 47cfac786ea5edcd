#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Corrupt shm files: each reported once, naming the field and its value,
# then skipped; garbage in the rings of a well-formed file is counted, not
# fatal; the agent keeps running and still ships a good process's spans.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"

start_collector
start_agent
sleep 0.3

# Write fay-<pid>-<inst>.shm files: a well-formed header, then one damage.
python3 - "$SHM" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
HDR, SLOT, CTL = 4096, 64, 128
def hdr(pid, inst, nrings=2, slots=64, npool=4, stride=1024, **kw):
    pool_off = HDR
    rings_off = pool_off + npool * stride
    ring_stride = CTL + slots * SLOT
    size = rings_off + nrings * ring_stride
    f = dict(magic=0x314d48535f594146, version=1, hdr_size=HDR, file_size=size,
             instance=inst, pid=pid, state=1, start_ns=0, rings_off=rings_off,
             ring_stride=ring_stride, nrings=nrings, ring_slots=slots,
             pool_off=pool_off, npool=npool, pool_stride=stride,
             service=b'corrupt', ip=b'127.0.0.1')
    f.update(kw)
    b = struct.pack('<QIIQQIIQQQIIQII', f['magic'], f['version'], f['hdr_size'],
                    f['file_size'], f['instance'], f['pid'], f['state'], f['start_ns'],
                    f['rings_off'], f['ring_stride'], f['nrings'], f['ring_slots'],
                    f['pool_off'], f['npool'], f['pool_stride'])
    b += f['service'].ljust(64, b'\0')[:64] + f['ip'].ljust(48, b'\0')[:48]
    return bytearray(b.ljust(size, b'\0')), size
def put(pid, inst, data):
    # whole, then renamed into place: the agent must see each damage as
    # written, not a file python is still writing (its first 8 KiB
    # alone read as "file_size is 16640 but the file is 16384 bytes")
    name = os.path.join(d, 'fay-%d-%016x.shm' % (pid, inst))
    open(name + '.part', 'wb').write(data)
    os.rename(name + '.part', name)
cases = [
    ('magic', dict(magic=0x1122334455667788)),
    ('version', dict(version=7)),
    ('slots', dict(ring_slots=96)),
    ('filesize', dict(file_size=12345)),
    ('nrings', dict(nrings=0)),
    ('ringsoff', dict(rings_off=1 << 40)),
    ('state', dict(state=9)),
    ('service', dict(service=b'x' * 64)),
]
for i, (name, kw) in enumerate(cases):
    b, _ = hdr(900000 + i, 0x100 + i, **kw)
    put(900000 + i, 0x100 + i, b)
b, _ = hdr(999, 0x200)                  # name says pid 900100, header 999
put(900100, 0x200, b)
put(900101, 0x201, b'')                 # empty: never becomes ready
os.mkdir(os.path.join(d, 'fay-900102-0000000000000202.shm'))
# Well-formed header, rings full of garbage; pid not running.
b, size = hdr(900103, 0x203)
rnd = random.Random(7)
for off in range(HDR + 4 * 1024, size):
    b[off] = rnd.randrange(256)
for r in range(2):   # ctl.head/records plausible-looking
    o = HDR + 4 * 1024 + r * (CTL + 64 * SLOT)
    b[o:o + 16] = struct.pack('<QQ', 5000, 300)
put(900103, 0x203, b)
PY

expect() {   # expect FILE-PATTERN MESSAGE-PART (a pass is at once; 30 s for load)
	wait_for 30 grep -q "$1.*$2" "$T_TMP/agent.log"
}
ok "bad magic named with its value" expect fay-900000- "magic is 0x1122334455667788"
ok "bad version" expect fay-900001- "version is 7"
ok "ring_slots not a power of two" expect fay-900002- "ring_slots is 96, want a power of two"
ok "file_size vs the real size" expect fay-900003- "file_size is 12345 but the file is"
ok "nrings 0" expect fay-900004- "nrings is 0"
ok "rings past the end" expect fay-900005- "past the end of the file"
ok "unknown state" expect fay-900006- "state is 9"
ok "unterminated service" expect fay-900007- "service is not NUL-terminated"
ok "pid differs from the name" expect fay-900100- "pid is 999 but the file name says 900100"
ok "a directory is not a shm file" expect fay-900102- "not a regular file"
ok "an empty file: not ready, given up after 5 s" \
	wait_for 30 grep -q "fay-900101-.*not ready after 5 s" "$T_TMP/agent.log"
ok "garbage rings: drained without crashing, file removed" \
	wait_for 30 bash -c "! test -e '$SHM/fay-900103-0000000000000203.shm'"
ok "garbage counted as corrupt slots" agent_log_has "fay-900103-0000000000000203.shm ring"
sleep 1
n=$(grep -c "^error: shm file" "$T_TMP/agent.log")
ok "each bad file reported exactly once ($n reports for 11 files)" test "$n" -eq 11
ok "agent still running" kill -0 "$AGENT_PID"
ok "corrupt files left in place (not ours to delete)" test -e "$SHM/fay-900000-0000000000000100.shm"

produce --count 1000 --ids "$T_TMP/ids"
ok "a good process is still served" wait_delivered 1000 30
ok "exactly once" exactly_once "$T_TMP/ids"
ok "stats: 11 corrupt files" wait_for 30 bash -c "grep -q '\"corrupt_files\":11' '$STATE/stats.json'"
stop_agent; rc=$?
ok "exit 0" test $rc -eq 0

[ $T_FAILED -eq 0 ] || show_logs 40
[ -n "${AGENT_TEST_VERBOSE:-}" ] && show_logs 60
done_testing
