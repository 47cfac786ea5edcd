#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The runtime in a process takes none of the program's descriptor
# numbers (src/rt/control.c): its thread works in a file table of its
# own.  Before, the thread waited for fay in accept4(), which reserves
# the lowest free number before it blocks: a program that closed its
# stdout and opened a file got 4, not 1, and its dup2() onto 1 failed
# with EBUSY (dash's `echo x > f` then failed with EBADF: CI's
# test_inject_entry saw "echo: I/O error").  fd_work (inline_tools/)
# counts on POSIX's numbers, with the runtime preloaded and no fay (the
# thread waiting), under fay run, and after its runtime's thread took
# its own table, or under a seccomp filter in the shared one above the
# program's numbers (a pipe's end closed by the program reaches the reader
# at once: the thread kept no copy).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
P=$BUILD/tests/bin/fd_work
RT=$BUILD/libfay-probe.so
[ -x "$P" ] || { fail "fd_work is built (make)"; done_testing; exit 1; }

for i in 1 2 3; do
	LD_PRELOAD=$RT "$P" reuse 2>"$T_TMP/err"
	ok "preloaded, no fay, run $i: close(1) then open() gives 1, dup2() onto 1 works ($(cat "$T_TMP/err"))" \
		grep -qx 'open 1 dup2 1' "$T_TMP/err"
done
LD_PRELOAD=$RT "$P" reuse 2>"$T_TMP/err" &
p=$!
sleep 0.05
low=$(ls -l /proc/$p/fd 2>/dev/null | awk '/socket/ && $9 < 900 { print $9 }' | tr '\n' ' ')
ok "the program's table has no runtime descriptor below 900 (${low:-none}), the thread's own has its socket" \
	bash -c '[ -z "$2" ] && ls -l /proc/$1/task/*/fd | grep -q socket' _ $p "$low"
wait $p

# under a seccomp filter (unshare() not tried: a filter may kill for it)
# the table is shared: the thread waits in poll(), not accept4(), and its
# socket sits near the descriptor limit
for i in 1 2; do
	LD_PRELOAD=$RT "$P" seccomp reuse 2>"$T_TMP/err" &
	p=$!
	sleep 0.05
	hi=$(ls -l /proc/$p/fd 2>/dev/null | awk '/socket/ { print $9 }' | head -1)
	wait $p
	ok "seccomp, run $i: the same numbers ($(cat "$T_TMP/err")), the runtime's socket at ${hi:-none} (>= 900)" \
		bash -c 'grep -qx "open 1 dup2 1" "$1" && [ "${2:-0}" -ge 900 ]' _ "$T_TMP/err" "$hi"
done

rm -f "$T_TMP/flag"
LD_PRELOAD=$RT "$P" eof "$T_TMP/flag" 2>"$T_TMP/err" | (cat >/dev/null; touch "$T_TMP/flag")
ok "a pipe's end the program closes reaches its reader at once (the thread kept no copy: $(cat "$T_TMP/err"))" \
	grep -qx 'eof seen' "$T_TMP/err"

timeout 60 "$FAY" run --json --probe-mode=inline --query \
	"from f in function(\"$P:fay_fd_fn\") select { n: count(), s: sum(f.arg(0)) }" \
	-- "$P" reuse >"$T_TMP/out" 2>"$T_TMP/err"
ok "fay run, inline: the program's descriptors as without fay ($(grep -E '^open' "$T_TMP/err"))" \
	grep -qx 'open 1 dup2 1' "$T_TMP/err"
ok "... and the probe armed ($(grep -c ': inline (' "$T_TMP/err") inline site)" grep -q ': inline (fay_fd_fn' "$T_TMP/err"

# a shell's command substitutions and a pipeline under fay run, every
# process inline (the runtime loaded into each at its entry: a
# constructor that waited for its thread there hung, the process held
# stopped by fay and the thread with it)
timeout 60 "$FAY" run --json --probe-mode=inline --query \
	'from f in function("libc:getpid") select { n: count() >= 0 }' \
	-- bash -c 'a=$(echo hi); b=$(ls /proc/self/fd | wc -l); echo "$a $b" | cat' >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
ok "bash's command substitutions and a pipeline, every process inline: ends, output its own (rc $RC: $(head -1 "$T_TMP/out"); $(grep -c 'inline with' "$T_TMP/err") descendants inline)" \
	bash -c '[ "$1" = 0 ] && grep -qE "^hi [0-9]+$" "$2" && ! grep -q "not reached" "$3"' _ $RC "$T_TMP/out" "$T_TMP/err"

timeout 60 "$FAY" run --json --probe-mode=inline --query \
	"from f in function(\"$P:fay_fd_fn\") select { n: count(), s: sum(f.arg(0)) }" \
	-- "$P" closerange 1000 >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
ok "a program's close_range(3, ~0) under fay run: every call counted, the program's answer its own (rc $RC: $(tail -1 "$T_TMP/out"); $(grep '^calls' "$T_TMP/err"))" \
	bash -c '[ "$1" = 0 ] && [ "$(tail -1 "$2")" = "{\"n\":1000,\"s\":499500}" ] && grep -qx "calls 1000 sum 500500" "$3"' _ $RC "$T_TMP/out" "$T_TMP/err"
done_testing
