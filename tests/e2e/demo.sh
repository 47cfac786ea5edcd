#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: scripts/demo (what `make demo` runs) on private ports and a
# private directory: it stores every blockstack trace, shows one write
# request's waterfall, and answers the live FayQL queries through the
# agent (bs_send per layer with eBPF; span latency per layer and span name
# with spans(...)), with rows for every blockstack layer, counted for real.
. "$(dirname "$0")/../lib/lib.sh"
need_root
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export DEMO_DIR=$T_TMP/demo DEMO_HTTP=127.0.0.1:$(free_port)
export DEMO_LISTEN=127.0.0.1:$(free_port) DEMO_REQUESTS=20
[ -x "$FAY_BUILD/blockstack" ] || skip_all "$FAY_BUILD/blockstack is not built (make examples)"
stop_demo() { "$TOP/scripts/demo" stop >/dev/null 2>&1; }
trap "stop_demo; t_cleanup" EXIT   # (lib.sh's own trap removes $T_TMP)

out=$("$TOP/scripts/demo" 2>&1)
rc=$?
diag "$(tail -n 30 <<<"$out")"
ok "scripts/demo succeeds" test $rc -eq 0
ok "it stores every trace" grep -q "demo: stored 20 traces" <<<"$out"
ok "it shows a write request's waterfall" grep -q '^\$ fay traces show [0-9a-f]\{16,32\}$' <<<"$out"
ok "it prints the live query" grep -q "^\$ fay query --cluster http://$DEMO_HTTP" <<<"$out"
ok "the agent attached the query's probes" grep -q "attached: uprobe .*blockstack:bs_send" <<<"$out"
ok "every host answered" grep -q "result: 1 of 1 hosts answered" <<<"$out"
# One row per layer, each with a positive count.
for layer in vm-client composer mapper blocker-1; do
	ok "the answer has a $layer row with sends > 0" \
		awk -v l="$layer" '$1 == l && $2 > 0 { f = 1 } END { exit !f }' <<<"$out"
done
# The spans(...) answer: one row per layer and span name, durations > 0.
ok "it prints the spans(...) query" grep -q "^\$ fay query --cluster http://$DEMO_HTTP 'from sp in cluster.spans" <<<"$out"
for ls in "vm-client write" "composer write" "mapper map" "mapper replicate" "blocker-1 write"; do
	ok "the spans answer has a '$ls' row with n > 0 and a latency" \
		awk -v l="${ls% *}" -v n="${ls#* }" '$1 == l && $2 == n && $3 > 0 && $5 > 0 { f = 1 } END { exit !f }' <<<"$out"
done
# The UI's address carries the collector's probe token (#20): with it the
# Live query page's POST /api/query loads probes even from a browser of
# another user (nobody here); without it that user is refused.
ui=$(sed -n 's/^ *fay web UI: *//p' <<<"$out")
ok "it prints the web UI's address with the probe token" grep -q "^http://$DEMO_HTTP/#token=[0-9a-f]\{64\}$" <<<"$ui"
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	tok=${ui##*#token=}
	nob() { setpriv --reuid nobody --regid nogroup --clear-groups "$@"; }
	nob curl -s -N -X POST -H "Authorization: Bearer $tok" \
		--data-binary 'from s in syscall("getppid") select count() for 1s' \
		"http://$DEMO_HTTP/api/query" >"$T_TMP/live" 2>&1
	ok "another user with the token: a syscall query runs" grep -q '"type":"end"' "$T_TMP/live"
	diag "$(head -c 300 "$T_TMP/live")"
	st=$(nob curl -s -o /dev/null -w '%{http_code}' -X POST \
		--data-binary 'from s in syscall("getppid") select count() for 1s' "http://$DEMO_HTTP/api/query")
	ok "... and without it: refused (403)" test "$st" = 403
fi
ok "the collector and agent are still running" "$TOP/scripts/demo" status
done_testing
