#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A short soak (bench/soak): blockstack under two agents, Zipkin posts over
# HTTP, a standing cluster query and UI readers for 40 s, with a SIGKILL of
# an agent or the collector every 6 s (each restarted on its state): every
# span produced is stored exactly once, everything comes back, and the
# collector's RSS and fds do not grow by half after the first quarter.
# bench/soak --duration 1h is the long run (bench/RESULTS.md).
. "$(dirname "$0")/../lib/lib.sh"
need_root
TOP=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$BUILD/blockstack" ] || skip_all "blockstack is not built (make examples)"
out=$(FAY_BUILD=$BUILD "$TOP/bench/soak" --duration 40s --interval 3s --kill-every 2 2>&1)
rc=$?
while IFS= read -r l; do diag "$l"; done <<<"$out"
ok "bench/soak --duration 40s --kill-every 2 passes" test $rc -eq 0
ok "it killed and restarted components" grep -qE "soak: [0-9]+s, [1-9][0-9]* restarts" <<<"$out"
ok "lost 0, duplicated 0" grep -q "lost 0, duplicated 0" <<<"$out"
done_testing
