#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `fay probes`: listing syscalls, tracepoints, kernel functions and the
# symbols of binaries and libraries; and the probe tests leave no BPF
# program behind (bpftool prog).
. "$(dirname "$0")/../lib/lib.sh"
need_root
[ -x "$FAY" ] || skip_all "fay is not built ($FAY)"

out=$T_TMP/out
err=$T_TMP/err

# one_line PATTERN WANT: the listing is exactly WANT
one_line() {
	"$FAY" probes "$1" >"$out" 2>"$err" && [ "$(cat "$out")" = "$2" ]
}

ok "--help is a manual" bash -c '"$0" probes --help | grep -q "^SYNOPSIS" &&
	"$0" probes --help | grep -q "^EXIT STATUS" && "$0" probes --help | grep -q "^EXAMPLES"' "$FAY"
ok "syscall:getppid listed" one_line 'syscall:getppid' 'syscall:getppid'
ok "a glob over syscalls" bash -c '"$0" probes "syscall:*read*" | grep -qx syscall:pread64' "$FAY"
ok "tracepoint by name" one_line 'sched:sched_switch' 'tracepoint:sched:sched_switch'
ok "kernel function from BTF" one_line 'kernel.function:vfs_read' 'kernel.function:vfs_read'
ok "libc:read resolved like the dynamic loader" bash -c \
	'"$0" probes "libc:read" | grep -Eqx "function:/(usr/)?lib/x86_64-linux-gnu/libc.so.6:read"' "$FAY"
ok "a program from \$PATH" bash -c '"$0" probes "function:bash:readline" | grep -q ":readline$"' "$FAY"
ok "--count" bash -c '[ "$("$0" probes -c "syscall:getppid")" = 1 ]' "$FAY"

"$FAY" probes 'libnothere:x' >"$out" 2>"$err"
rc=$?
ok "unknown library: exit 1" [ $rc -eq 1 ]
ok "... and says so" grep -q 'cannot find "libnothere"' "$err"
"$FAY" probes 'zzz_no_such_probe_*' >"$out" 2>"$err"
ok "no match: exit 1, nothing printed" bash -c '[ "$1" -eq 1 ] && [ ! -s "$2" ]' _ $? "$out"
"$FAY" probes a b >"$out" 2>"$err"
ok "two patterns: usage error 2" [ $? -eq 2 ]

# Programs the probe tests load are gone once they exit.  The test names
# each program's id as it tears it down; other programs on this machine
# (another run of the same test, say) come and go meanwhile, so the check
# looks up those ids, never a count of programs with the same names.
PROBES=$BUILD/san/tests/unit/bpf/test_probes
if command -v bpftool >/dev/null && [ -x "$PROBES" ]; then
	"$PROBES" >"$T_TMP/probes.log" 2>&1
	ok "probe tests pass" bash -c 'grep -q "^1\.\." "$0" && ! grep -q "^not ok" "$0"' \
		"$T_TMP/probes.log"
	ids=$(sed -n 's/^\(not \)\{0,1\}ok [0-9]* - .*: program \([0-9]*\) gone after detach$/\2/p' \
		"$T_TMP/probes.log")
	ok "every program's id named (6 wanted: $(echo $ids))" \
		[ "$(echo "$ids" | grep -c .)" -ge 6 ]
	left=
	for id in $ids; do
		bpftool prog show id "$id" >/dev/null 2>&1 && left="$left $id"
	done
	ok "no program left behind (bpftool prog show id:${left:- none} found)" [ -z "$left" ]
else
	diag "bpftool or $PROBES missing: leftover check skipped"
fi
done_testing
