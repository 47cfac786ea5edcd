#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay as an unprivileged user (#10), as the units in dist/systemd/ run it:
# with no capability a query is refused with what it needs and nothing is
# left attached; with CAP_BPF and CAP_PERFMON alone the error names the
# tracefs permission; with CAP_DAC_READ_SEARCH too (fay-agent.service's
# set) a syscall query runs and counts exactly, and an agent ships spans
# and runs a cluster query for a collector; a uprobe says which capability
# this kernel wants.  The units pass systemd-analyze verify.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
command -v setpriv >/dev/null || skip_all "needs setpriv (util-linux)"
U=nobody
id "$U" >/dev/null 2>&1 || skip_all "no user $U"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"
# a directory the user can use, and copies of the binaries it can execute
D=$(mktemp -d /tmp/fay-lp.XXXXXX)
chmod 755 "$D"
trap 't_cleanup; rm -rf "$D"' EXIT
cp "$FAY" "$D/fay"; cp "$W" "$D/work"; cp "$BUILD/blockstack" "$D/blockstack" 2>/dev/null
chmod 755 "$D"/*
as() { # CAPS CMD...: run CMD as $U with CAPS ("" none) inheritable and ambient
	local caps=$1
	shift
	if [ -n "$caps" ]; then
		setpriv --reuid "$U" --regid nogroup --clear-groups --inh-caps "$caps" \
			--ambient-caps "$caps" --bounding-set "$caps" "$@"
	else
		setpriv --reuid "$U" --regid nogroup --clear-groups --bounding-set -all "$@"
	fi
}
nprogs() { bpftool prog list 2>/dev/null | grep -c "^[0-9]*: "; }
Q='from s in syscall("getppid") where s.comm == "work" select { n: count() } for 2s'

before=$(nprogs)
out=$(as "" "$D/fay" query "$Q" 2>&1)
rc=$?
ok "no capability: refused (exit $rc)" test $rc -ne 0
ok "... saying it needs root, or CAP_BPF and CAP_PERFMON" grep -q "CAP_BPF and CAP_PERFMON" <<<"$out"
ok "... and nothing stays loaded" test "$(nprogs)" = "$before"
diag "$out"

out=$(as +bpf,+perfmon "$D/fay" query "$Q" 2>&1)
ok "CAP_BPF + CAP_PERFMON only: the error names /sys/kernel/tracing and CAP_DAC_READ_SEARCH" \
	grep -q "/sys/kernel/tracing is root's.*CAP_DAC_READ_SEARCH" <<<"$out"
diag "$out"

CAPS=+bpf,+perfmon,+dac_read_search,+sys_ptrace
( sleep 1; "$D/work" getppid 500 >/dev/null ) &
out=$(as "$CAPS" "$D/fay" query "$Q" 2>&1)
rc=$?
diag "$out"
ok "with fay-agent.service's capabilities a syscall query runs as $U" test $rc -eq 0
ok "... and counts the 500 calls exactly" grep -qx " *500" <<<"$out"
ok "... and nothing stays loaded after it" test "$(nprogs)" = "$before"

out=$(as "$CAPS" "$D/fay" query 'from f in function("libc:getppid") select { n: count() } for 1s' 2>&1)
ok "a uprobe as $U says what this kernel asks for" grep -q "CAP_SYS_ADMIN, beyond CAP_BPF and CAP_PERFMON\|^ *n$" <<<"$out"
diag "$out"

# an agent as the user: ships the spans of a workload of the same user,
# and runs a cluster query for the collector
coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
mkdir -p "$D/state" "$D/shm"; chown "$U" "$D/state" "$D/shm"
as "$CAPS" "$D/fay" agent --collector 127.0.0.1:$WP --state-dir "$D/state" --shm-dir "$D/shm" \
	--host lp-host >"$T_TMP/agent.log" 2>&1 &
APID=$!; T_PIDS+=($APID)
peers() { curl -s "$URL/api/cluster/peers" | grep -q '"host":"lp-host"'; }
ok "the agent as $U connects" wait_for 10 peers
if [ -x "$D/blockstack" ]; then
	out=$(as "" env FAY_SHM_DIR="$D/shm" "$D/blockstack" --requests 20 --sample 1 2>&1)
	n=$(sed -n 's/.* \([0-9][0-9]*\) spans recorded.*/\1/p' <<<"$out")
	got() { [ "$(curl -s "$URL/api/v2/traces?limit=1000&lookback=86400000" | python3 -c 'import json,sys; print(sum(map(len,json.load(sys.stdin))))')" = "$n" ]; }
	ok "it ships every span of the user's blockstack ($n)" wait_for 20 got
fi
( sleep 1.5; "$D/work" getppid 300 >/dev/null ) &
out=$("$FAY" query --cluster "$URL" 'from s in cluster.syscall("getppid") where s.comm == "work" select { n: count() } for 3s' 2>&1)
diag "$out"
ok "a cluster query runs on the unprivileged agent and counts exactly" grep -qx " *300" <<<"$out"
ok "the agent is still running" kill -0 "$APID"

if command -v systemd-analyze >/dev/null; then
	mkdir -p "$T_TMP/units"
	for u in "$TOP"/dist/systemd/*.service; do
		sed "s|/usr/local/bin/fay|$FAY|" "$u" >"$T_TMP/units/$(basename "$u")"
	done
	out=$(systemd-analyze verify "$T_TMP"/units/*.service 2>&1)
	ok "dist/systemd units pass systemd-analyze verify" test -z "$out"
	diag "$out"
fi
done_testing
