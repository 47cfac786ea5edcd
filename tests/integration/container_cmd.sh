#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A command fay starts that enters another root (issue #25): `fay query
# -c CMD` whose CMD execs into a chroot or a new mount namespace (`chroot
# ROOT prog`, `unshare -m chroot ROOT prog`), where libc is its own COPY
# (another inode than the host's).  The probe was resolved before the
# exec, on the host's libc; the exec watch follows the command's process
# and attaches to the file its new root has, and the command, fay's own
# child, is held at that exec (stopped by the BPF program, continued
# once fay has looked) so that calls from the first instruction of main()
# are counted: exactly N, in uprobe and auto mode (-c runs as a uprobe
# there), and with `fay run --probe-mode=uprobe`.  Before, the answer
# was n = 0, silently.  A library the command
# dlopen()s from elsewhere in its root is followed too (its mmap(), held
# the same way).  The host's command keeps its answer.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"

R=$T_TMP/root
ctr_root "$R"
ok "the root's libc is another file than the host's" \
	test "$(stat -c %i "$R/usr/lib/x86_64-linux-gnu/libc.so.6")" != \
	"$(stat -L -c %i /lib/x86_64-linux-gnu/libc.so.6)"
Q='from f in function("libc:getppid") select { n: count() }'

# run MODE CMD QUERY: fay query -c CMD; its --json answer (stderr in
# $T_TMP/c.err)
run() {
	rm -f "$R/w/done"
	timeout 120 nice -n 10 "$FAY" query --json --probe-mode="$1" -c "$2" "$3" \
		>"$T_TMP/c.out" 2>"$T_TMP/c.err"
	cat "$T_TMP/c.out"
}
# MODE CMD N WHAT
check() {
	local a
	a=$(run "$1" "$2" "$Q")
	[ "$a" = "{\"n\":$3}" ] && pass "$4: n = $3" ||
		fail "$4: n = $3" "answer: $a" "$(cat "$T_TMP/c.err")"
}

N=3000
check uprobe "chroot $R /bin/ctr_work /w $N now" $N \
	"-c 'chroot ROOT prog', uprobe, calls from main()'s first instruction"
# (named by its path under fay's root, or through the process's root)
grep -Eq "one more file, ($R|/proc/[0-9]+/root)/(usr/)?lib/x86_64-linux-gnu/libc.so.6 \(process [0-9]+, started after the attach\): 2 files" \
	"$T_TMP/c.err" && pass "the note names the root's libc" ||
	fail "the note names the root's libc" "$(cat "$T_TMP/c.err")"
check uprobe "unshare -m chroot $R /bin/ctr_work /w $N now" $N \
	"-c 'unshare -m chroot ROOT prog' (its own mount namespace), uprobe"
check auto "unshare -m chroot $R /bin/ctr_work /w $N now" $N \
	"-c 'unshare -m chroot ROOT prog', auto"
# a shell in between: sh -c 'exec ...' (the same process all along; the
# shell's own getppid() calls, dash's $PPID, are the host's libc's)
a=$(run uprobe "chroot $R /bin/ctr_work /w $N now >/dev/null" \
	'from f in function("libc:getppid") where f.comm == "ctr_work" select { n: count() }')
[ "$a" = "{\"n\":$N}" ] && pass "-c with shell syntax (sh -c 'exec chroot ...'), uprobe: n = $N" ||
	fail "-c with shell syntax (sh -c 'exec chroot ...'), uprobe: n = $N" "answer: $a" "$(cat "$T_TMP/c.err")"
# fay run with a uprobe: the same (its runtime, preloaded by a host
# path, is not in the root; the uprobe follows and holds the command)
a=$(timeout 120 nice -n 10 "$FAY" run --json --probe-mode=uprobe --query "$Q" -- \
	chroot "$R" /bin/ctr_work /w $N now 2>"$T_TMP/c.err")
[ "$a" = "{\"n\":$N}" ] && pass "fay run --probe-mode=uprobe -- chroot ROOT prog: n = $N" ||
	fail "fay run --probe-mode=uprobe -- chroot ROOT prog: n = $N" "answer: $a" "$(cat "$T_TMP/c.err")"
# the host's own command: unchanged
D=$T_TMP/host
mkdir -p "$D"
check uprobe "$CW $D 2000 now" 2000 "the host's command (no other root), uprobe"

# a library the command dlopen()s from elsewhere in its root (not in its
# library directories): found at its mmap(), the command held there
if [ -e /lib/x86_64-linux-gnu/libz.so.1 ]; then
	mkdir -p "$R/opt/x"
	cp /lib/x86_64-linux-gnu/libz.so.1 "$R/opt/x/libz.so.1"
	touch "$R/w/go" "$R/w/stop"	# it calls at once and exits
	a=$(run uprobe "unshare -m chroot $R /bin/ctr_work /w 500 dlopen /opt/x/libz.so.1 zlibVersion" \
		'from f in function("libz:zlibVersion") select { n: count() }')
	# (the host's libz, what the name resolved to before the exec, is
	# not what it maps)
	[ "$a" = '{"n":500}' ] && pass "a library dlopen()ed in the root: n = 500" ||
		fail "a library dlopen()ed in the root: n = 500" "answer: $a" "$(cat "$T_TMP/c.err")"
	grep -Eq "one more file, ($R|/proc/[0-9]+/root)/opt/x/libz.so.1 \(process [0-9]+, mapped after the attach\)" \
		"$T_TMP/c.err" && pass "the note names the dlopen()ed copy" ||
		fail "the note names the dlopen()ed copy" "$(cat "$T_TMP/c.err")"
else
	diag "no host libz.so.1 (zlib1g): no dlopen case"
fi
# nothing left stopped: every command above ran to its end (its done
# file), and no ctr_work of ours is left
ctr_none_left "$R" "$D"
done_testing
