#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cluster queries go inline through the agent as fay query's auto mode
# does on one host: a real collector, a real agent, a cluster query on
# process(PID).function(...) of (1) a process started with fay run
# --agent (its runtime preloaded) and (2) a process started normally (the agent loads
# the runtime with ptrace); exact counts, equal to uprobe mode, and the
# agent's progress line says inline and why; (3) a library a process
# dlopen()s after the query attached.  An agent started with
# --no-inject uses a uprobe on the normal process and says why.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
. "$(dirname "$0")/collector_lib.bash"

coll_start "$T_TMP/c.db"
# agent NAME [ARGS...]: an agent as host NAME; its pid in APID
agent() {
	local h=$1
	shift
	mkdir -p "$T_TMP/$h"
	"$FAY" agent --collector 127.0.0.1:$WP --host "$h" --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" "$@" >>"$T_TMP/$h.log" 2>&1 &
	APID=$!
	T_PIDS+=($APID)
	wait_for 30 peer "$h"
}
peer() { curl -s "$URL/api/cluster/peers" | grep -q "\"host\":\"$1\""; }
agent h1
ok "an agent with a query connection" peer h1

# cq HOW K [FAY RUN ARGS]: K calls of fay_inline_fn(i, 7) by a process
# started by HOW (run: fay run --agent; plain: directly), held until the cluster
# query attached; the answer in $T_TMP/out, the progress in $T_TMP/err,
# the process's pid in wpid
cq() {
	local how=$1 k=$2 go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM
	if [ "$how" = run ]; then
		QW_WAIT=$go "$FAY" run --agent -- "$W" calls "$k" >/dev/null 2>&1 & wpid=$!
		wait_for 60 test -S /run/fay/inline/$wpid.sock
	else
		QW_READY=$ready QW_WAIT=$go "$W" calls "$k" >/dev/null 2>&1 & wpid=$!
		in_main "$ready"
	fi
	: >"$T_TMP/err"
	timeout 60 "$FAY" query --cluster "$URL" --json \
		"from f in process($wpid).function(\"fay_inline_fn\") select { n: count(), s: sum(f.arg(0)) } for 5s" \
		>"$T_TMP/out" 2>"$T_TMP/err" & local q=$!
	wait_for 40 grep -q ': attached' "$T_TMP/err"
	touch "$go"
	wait $wpid
	WRC=$?
	wait $q
}
TRUTH='{"n":1000,"s":499500}'
# answered WHAT PATTERN: the last answer is the truth and the progress
# lines match PATTERN (wpid in it expanded by the caller)
answered() {
	local a
	a=$(grep -o '{"n":[0-9]*,"s":[0-9]*}' "$T_TMP/out" | tail -1)
	[ "$a" = "$TRUTH" ] && grep -q "$2" "$T_TMP/err" && pass "$1 ($a)" ||
		fail "$1" "$a" "$(cat "$T_TMP/out" "$T_TMP/err")"
}

cq run 1000
answered "a process started with fay run --agent: inline through the agent, exact, the progress says so" \
	"h1: attached: inline .*(pid $wpid); pid $wpid: inline (fay_inline_fn"
ok "... and it ran to its end (exit 0)" test $WRC -eq 0

cq plain 1000
answered "a process started normally: the agent loaded the runtime, inline, exact, the progress says so" \
	"h1: attached: inline .*(pid $wpid); pid $wpid: inline, runtime loaded with ptrace in [0-9.]* ms (fay_inline_fn"
ok "... and it ran to its end (exit 0)" test $WRC -eq 0

# a library the process loads only after the query attached (issue 19
# item 3): armed at each of its 30 dlopen()s through the agent
LOOP=$BUILD/tests/bin/dlopen_loop
LIB=$(cd "$BUILD/tests/bin" && pwd)/libinline_lib.so
go=$T_TMP/go.loop
"$LOOP" "$LIB" 30 100 "$go" >"$T_TMP/loop.out" 2>&1 & wpid=$!
: >"$T_TMP/err"
timeout 60 "$FAY" query --cluster "$URL" --json \
	"from f in process($wpid).function(\"$LIB:fay_lib_fn\") select { n: count() } for 8s" \
	>"$T_TMP/out" 2>"$T_TMP/err" & q=$!
wait_for 40 grep -q ': attached' "$T_TMP/err"
touch "$go"
wait $wpid
WRC=$?
wait $q
a=$(grep -o '{"n":[0-9]*}' "$T_TMP/out" | tail -1)
[ "$a" = '{"n":3000}' ] && [ $WRC -eq 0 ] && [ "$(cat "$T_TMP/loop.out")" = "$("$LOOP" "$LIB" 30 100)" ] &&
	grep -q "pid $wpid: inline, .*fay_lib_fn: armed when .* is loaded (dlopen)" "$T_TMP/err" &&
	pass "a library dlopen()ed 30 times after the cluster query attached: inline through the agent, 3000 of 3000 calls, the process's output right ($a)" ||
	fail "library loaded later, through the agent (exit $WRC)" "$a" "$(cat "$T_TMP/out" "$T_TMP/err")"

kill $APID
wait $APID 2>/dev/null
agent h2 --no-inject
cq plain 1000
answered "an agent with --no-inject: a uprobe, exact, the progress says why" \
	"h2: attached: uprobe .*; pid $wpid: uprobe: the fay runtime is not loaded and --no-inject forbids loading it"
"$FAY" run --agent --query 'from f in function("a:b") select count()' -- true 2>"$T_TMP/e"
RC=$?
[ $RC -eq 2 ] && grep -q 'give --agent or --query/-f, not both' "$T_TMP/e" &&
	pass "fay run --agent with --query: a usage error" || fail "run --agent --query (rc=$RC)" "$(cat "$T_TMP/e")"
done_testing
