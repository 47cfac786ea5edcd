#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# categorize across a cluster: a collector and six real `fay agent`
# processes (h1..h6), each host with its own copy of the workload binary
# (agents on one machine share a kernel: the probe on ./qw resolves to
# each host's own file, so each host has its own truth).  Three kinds of
# host: h1 h2 sleep 300 us at a time, h3 h4 600 us, h5 h6 900 us; after
# ~6 s h6 turns into the first kind.  Grouped by the mix of
# fay_work_sleep's argument, k-means at the collector must recover the
# three groups exactly in every window, report h6 changed once (from the
# 900 us category to the 300 us one) and nobody else; then `into auto`
# must choose k = 3 by itself.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"

HOSTS="h1 h2 h3 h4 h5 h6"
declare -A US=([h1]=300 [h2]=300 [h3]=600 [h4]=600 [h5]=900 [h6]=900)

coll_start "$T_TMP/c.db"
for h in $HOSTS; do
	d=$T_TMP/$h
	mkdir -p "$d"
	cp "$W" "$d/qw"
	( cd "$d" && exec "$FAY" agent --collector 127.0.0.1:$WP --host "$h" \
		--shm-dir "$d" --state-dir "$d" ) >>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
all_connected() {
	for h in $HOSTS; do
		curl -s "$URL/api/cluster/peers" | grep -q "\"host\":\"$h\"" || return 1
	done
}
ok "six agents open query connections" wait_for 30 all_connected

go=$T_TMP/go
for h in $HOSTS; do
	# each ends by itself (timeout) whatever happens to this script
	if [ $h = h6 ]; then
		# ~5.7 s at 900 us: the first whole window after the go
		# (it starts within 2 s of it) ends before h6 turns
		( QW_WAIT=$go timeout 60 "$T_TMP/$h/qw" sleep 6000 900 &&
		  exec timeout 60 "$T_TMP/$h/qw" sleep 1000000 300 ) &
	else
		QW_WAIT=$go timeout 60 "$T_TMP/$h/qw" sleep 1000000 "${US[$h]}" &
	fi
	T_PIDS+=($!)
done

Q='from c in cluster.function("./qw:fay_work_sleep")
   group c by {host: c.host, us: c.arg(0)} into g
   select { host: g.host, us: g.us, n: g.count() }
   categorize host by us into 3 window 2s for 16s'
timeout 90 "$FAY" query --cluster "$URL" --json "$Q" >"$T_TMP/out" 2>"$T_TMP/err" &
QPID=$!
ok "the query attaches on six hosts" wait_for 30 bash -c '[ "$(grep -o "^fay: [^:]*: attached" "$1" | sort -u | wc -l)" -ge 6 ]' _ "$T_TMP/err"
touch "$go"
GO_NS=$(date +%s%N)
wait $QPID
ok "fay query --cluster --json with categorize ends well" [ $? -eq 0 ]

. "$(dirname "$0")/query_tools/categorize_six.bash"
categorize_six "$T_TMP/out" "$GO_NS"

# into auto, on the same hosts (h6 has turned; they run 60 s): k is
# chosen by silhouette, 3 here, with the same three groups
Q='from c in cluster.function("./qw:fay_work_sleep")
   group c by {host: c.host, us: c.arg(0)} into g
   select { host: g.host, us: g.us, n: g.count() }
   categorize host by us into auto for 4s'
timeout 60 "$FAY" query --cluster "$URL" --json "$Q" >"$T_TMP/auto" 2>"$T_TMP/auto.err"
ok "into auto: the query ends well" [ $? -eq 0 ]
auto=$(python3 -c '
import json, sys
w = [json.loads(l) for l in open(sys.argv[1]) if "\"categories\"" in l][-1]
print(w.get("k"), w.get("k_auto"), sorted(sorted(c["members"]) for c in w["categories"]),
      w.get("silhouette", 0) > 0.5)' "$T_TMP/auto" 2>&1)
ok "into auto: k 3 chosen, {h1 h2 h6} {h3 h4} {h5}, silhouette over 0.5 ($auto)" \
	[ "$auto" = "3 True [['h1', 'h2', 'h6'], ['h3', 'h4'], ['h5']] True" ]
done_testing
