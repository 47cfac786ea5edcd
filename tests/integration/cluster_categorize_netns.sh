#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fay's "automatic analysis of cluster behavior", as its talk did it: six
# hosts categorized by their system-call mix.  Each host is a network
# namespace (tests/lib/netns.bash) with its own address, its own `fay
# agent` reporting to a collector in a seventh, and its own cgroup: the
# hosts share one kernel, so each agent runs with --cgroup and its
# syscall("*") probe counts its host's processes alone, as it would on a
# machine of its own.  Three kinds of host (query_work behave): h1 h2 do
# file I/O (openat, read, fstat, close), h3 h4 network I/O (sendto,
# recvfrom), h5 h6 mostly sleep; after ~6 s h6 turns to file I/O.
# k-means at the collector over `cluster.syscall("*")` grouped by host
# and system-call name must recover the three groups exactly in every
# window, report h6 changed once (from h5's category to h1's) and nobody
# else.
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
ns_need_query_work
CG=/sys/fs/cgroup
[ -e $CG/cgroup.controllers ] || CG=/sys/fs/cgroup/unified
[ -e $CG/cgroup.controllers ] || skip_all "no cgroup2 file system (each host needs a cgroup)"
ns_init

HOSTS="h1 h2 h3 h4 h5 h6"
declare -A KIND=([h1]=file [h2]=file [h3]=net [h4]=net [h5]=idle [h6]=idle)
cg_gone() {
	local h
	for h in $HOSTS; do rmdir "$CG/fay$$-$h" 2>/dev/null; done
}
trap 't_cleanup; cg_gone; ns_teardown' EXIT

for h in coll $HOSTS; do
	ns_add $h || { fail "namespace $h"; done_testing; exit; }
done
pass "7 hosts: collector $(ns_ip coll), h1..h6 $(ns_ip h1)..$(ns_ip h6)"

printf 'agt write agents\ncli read,probe client\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
echo cli >"$T_TMP/cli.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/agent.tok" "$T_TMP/cli.tok"
ns_bg coll "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 --db "$T_TMP/c.db" \
	--token-file "$T_TMP/tokens" >"$T_TMP/coll.log" 2>&1
ok "collector up" wait_for 15 ns_run coll curl -sf http://127.0.0.1:9411/health

ok "an agent refuses a cgroup that does not exist, naming it" \
	bash -c '"$1" agent --cgroup /fay-no-such-cgroup --collector 127.0.0.1:1 2>&1 |
		grep -q "no such cgroup.*fay-no-such-cgroup"; [ "${PIPESTATUS[0]}" = 2 ]' _ "$FAY"

for h in $HOSTS; do
	mkdir -p "$T_TMP/$h" "$CG/fay$$-$h"
	ns_enter_bg $h "$FAY" agent --collector "$(ns_ip coll):9410" --host $h --cgroup "/fay$$-$h" \
		--shm-dir "$T_TMP/$h" --state-dir "$T_TMP/$h" --token-file "$T_TMP/agent.tok" \
		>"$T_TMP/$h.log" 2>&1
done
peers() { [ "$(ns_run coll curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/cluster/peers | grep -o '"host":"h[1-6]"' | sort -u | wc -l)" -ge 6 ]; }
ok "six agents open query connections" wait_for 30 peers

# each host's workload in its namespace and its cgroup; each ends by
# itself (timeout) whatever happens to this script
go=$T_TMP/go
for h in $HOSTS; do
	if [ $h = h6 ]; then
		ns_enter_bg $h bash -c 'echo $$ >"$1/cgroup.procs" && QW_WAIT=$2 timeout 60 "$3" behave 6000 idle &&
			exec timeout 60 "$3" behave 60000 file' _ "$CG/fay$$-$h" "$go" "$W"
	else
		ns_enter_bg $h bash -c 'echo $$ >"$1/cgroup.procs" && QW_WAIT=$2 exec timeout 60 "$3" behave 60000 "$4"' \
			_ "$CG/fay$$-$h" "$go" "$W" "${KIND[$h]}"
	fi
done

Q='from s in cluster.syscall("*")
   group s by {host: s.host, call: s.name} into g
   select { host: g.host, call: g.call, n: g.count() }
   categorize host by call into 3 window 2s for 16s'
ns_run coll timeout 90 "$FAY" query --cluster http://127.0.0.1:9411 --token-file "$T_TMP/cli.tok" \
	--json "$Q" >"$T_TMP/out" 2>"$T_TMP/err" &
QPID=$!
attached6() { [ "$(hosts_attached "$T_TMP/err")" -ge 6 ]; }
ok "the query attaches on six hosts" wait_for 30 attached6
touch "$go"
GO_NS=$(date +%s%N)
wait $QPID
ok "fay query --cluster --json with categorize ends well" [ $? -eq 0 ]

. "$(dirname "$0")/query_tools/categorize_six.bash"
categorize_six "$T_TMP/out" "$GO_NS"
python3 - "$T_TMP/out" "$CATEGORIZE_VERDICT" >"$T_TMP/more" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"')]
tops = json.loads([l for l in open(sys.argv[2]) if l.startswith("tops ")][0][5:])
first = lambda m: (tops.get(m) or [""])[0]
print("kinds_top", first("h1 h2") in ("openat", "read", "fstat", "newfstat", "close")
      and first("h3 h4") in ("sendto", "recvfrom") and "sleep" in first("h5 h6"))
# no host counted another's calls: sendto and recvfrom on h3 and h4 alone
print("net_only_h34", all(r["host"] in ("h3", "h4") for r in rows
                          if r.get("call") in ("sendto", "recvfrom")))
EOF
more() { sed -n "s/^$1 //p" "$T_TMP/more"; }
ok "each category's first distinguishing call is its kind's ($(v tops))" [ "$(more kinds_top)" = True ]
ok "each agent counted its own host only: sendto/recvfrom on h3 and h4 alone" \
	[ "$(more net_only_h34)" = True ]
done_testing
