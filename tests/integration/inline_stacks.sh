#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# s.ustack on inline probes (issue #27): the runtime walks the frame
# pointers in the probe (src/rt/ustack.c), interns the stacks in a table
# shared with fay, and fay names them as it names a BPF stack map's.
# On stack_work's known call tree (main -> A -> B -> C, A -> D -> C)
# inline mode's folded stacks equal uprobe mode's exactly, at C's entry,
# at its exit, with a depth, and on a wildcard whose probed functions
# call each other through their trampolines (exit probes: the functions
# return into the trampoline, whose frame the walk must see through);
# without frame pointers the caller is exact and the rest is cut; a
# kernel stack says there is none; a signal handler's probe that
# interrupted a probe shows no frame of the runtime; a full table says
# "[lost]" and counts them; auto mode now takes such a query inline.  Real programs built
# without frame pointers (python3, xz) with a stack key on inline probes
# run to the same output and the same counts as without it.
. "$(dirname "$0")/../lib/lib.sh"
need_root
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -e "$BUILD/libfay-probe.so" ] || skip_all "no libfay-probe.so in $BUILD"
FP=$BUILD/tests/bin/stack_work_fp NOFP=$BUILD/tests/bin/stack_work_nofp
[ -x "$FP" ] && [ -x "$NOFP" ] || skip_all "stack_work is not built (make)"
. "$(dirname "$0")/query_lib.bash"

# both NAME CMD QUERY: the query's folded output, --probe-mode inline and
# uprobe, on a run each of CMD; equal (and the inline run's mode line
# says inline): pass.  Outputs in $T_TMP/inline, $T_TMP/uprobe.
both() {
	local m rc_i
	for m in inline uprobe; do
		timeout 60 "$FAY" query --probe-mode=$m --format folded -c "$2" "$3" \
			>"$T_TMP/out" 2>"$T_TMP/$m.err"
		RC=$?
		# from main inward, as query_stacks.sh compares: libc's frame
		# outside main is named from the maps read while the process
		# lives, and was once "[unknown]" (1 run of 30, load 15)
		sed -E 's/^.*;main(;| )/main\1/' "$T_TMP/out" | sort >"$T_TMP/$m"
		[ $m = inline ] && rc_i=$RC
	done
	if [ "$rc_i" -eq 0 ] && [ "$RC" -eq 0 ] && [ -s "$T_TMP/inline" ] &&
	   cmp -s "$T_TMP/inline" "$T_TMP/uprobe" && grep -q ': inline (' "$T_TMP/inline.err"; then
		pass "$1: inline = uprobe ($(wc -l <"$T_TMP/inline") stacks: $(tr '\n' ',' <"$T_TMP/inline" | head -c 300))"
	else
		fail "$1: inline = uprobe (rc $rc_i, $RC)" "inline: $(head -c 800 "$T_TMP/inline")" \
			"uprobe: $(head -c 800 "$T_TMP/uprobe")" "$(head -c 400 "$T_TMP/inline.err")"
	fi
}

K=600
both "function(C) by s.ustack, $K calls" "$FP calls $K" \
	"from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
RC=0
same "$T_TMP/inline" "main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))" \
	"inline: $K calls under main;A;B;C, $(((K + 2) / 3)) under main;A;D;C, exactly"
both "s.ustack(2)" "$FP calls $K" \
	"from f in function(\"$FP:C\") group f by f.ustack(2) into g select { stack: g.key, n: g.count() }"
RC=0
same "$T_TMP/inline" "B;C $K"$'\n'"D;C $(((K + 2) / 3))" "inline s.ustack(2): the two innermost frames"
# --format tree: the same stacks merged from their roots, each frame's
# inclusive count and share, children by count
fq --probe-mode=inline --format tree -c "$FP calls $K" \
	"from f in function(\"$FP:C\") group f by f.ustack(4) into g select { stack: g.key, calls: g.count() }"
T=$((K + (K + 2) / 3))
same "$T_TMP/out" "$(printf '%10s %7s  %s\n' calls % stack
printf '%10d %6.1f%%  %s\n' $T 100 main $T 100 '└─ A' $K $((100 * K / T)) '   ├─ B' \
	$K $((100 * K / T)) '   │  └─ C' $(((K + 2) / 3)) $((100 * ((K + 2) / 3) / T)) '   └─ D' \
	$(((K + 2) / 3)) $((100 * ((K + 2) / 3) / T)) '      └─ C')" \
	"--format tree: main, A, then B (75%) and D (25%), each over C"
timeout 30 "$FAY" query --format tree 'from s in syscall("getppid") select { n: count() } for 1s' \
	>"$T_TMP/out" 2>"$T_TMP/err"
ok "--format tree without a stack key: refused, saying what it needs ($(head -c 160 "$T_TMP/err"))" \
	grep -q 'needs a stack key as a column' "$T_TMP/err"
both "at C's exit (the caller's stack)" "$FP calls $K" \
	"from f in function(\"$FP:C\") where f.duration >= 0 group f by f.ustack into g select { stack: g.key, n: g.count() }"
# every one-letter function (A B C D), with exit probes: each returns
# into its trampoline, so a walk from C crosses B's, A's and D's
both "function(\"?\") with exit probes: frames through trampolines" "$FP calls $K" \
	"from f in function(\"$FP:?\") where f.duration >= 0 group f by f.ustack into g select { stack: g.key, n: g.count() }"
both "function(\"?\") at entry" "$FP calls $K" \
	"from f in function(\"$FP:?\") group f by f.ustack into g select { stack: g.key, n: g.count() }"

# ---- no frame pointers -------------------------------------------------------------
# stack_work built -fomit-frame-pointer: the runtime steps by the unwind
# table fay built from its .eh_frame (INL_UNWIND), so the stacks are the
# frame-pointer build's, exactly (main's build: "B;C", "D;C", cut)
nofp() {	# NAME QUERY WANT: inline, folded from main inward
	fq --probe-mode=inline --format folded -c "$NOFP calls $K" "$2"
	sed -E 's/^.*;main(;| )/main\1/' "$T_TMP/out" | sort >"$T_TMP/folded"
	same "$T_TMP/folded" "$3" "$1"
}
nofp "no frame pointers, at C's entry: the whole stack by the table ($K and $(((K + 2) / 3)))" \
	"from f in function(\"$NOFP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	"main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))"
nofp "no frame pointers, at C's exit (the caller's stack)" \
	"from f in function(\"$NOFP:C\") where f.duration >= 0 group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	"main;A;B $K"$'\n'"main;A;D $(((K + 2) / 3))"
nofp "no frame pointers, every one-letter function at entry (D is refused: a jump into its first bytes)" \
	"from f in function(\"$NOFP:?\") group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	"main;A $K"$'\n'"main;A;B $K"$'\n'"main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))"
# ... and through trampolines: A and B return into theirs
nofp "no frame pointers, with exit probes: frames through trampolines" \
	"from f in function(\"$NOFP:?\") where f.duration >= 0 group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	"main $K"$'\n'"main;A $K"$'\n'"main;A;B $K"$'\n'"main;A;D $(((K + 2) / 3))"
# FAY_UNWIND=fp: no table sent, frame pointers only: the caller is the
# return address at sp (exact at an entry); the walk from rbp, which this
# code does not keep as a frame pointer, is cut
FAY_UNWIND=fp fq --probe-mode=inline --format folded -c "$NOFP calls $K" \
	"from f in function(\"$NOFP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
sort "$T_TMP/out" >"$T_TMP/folded"
same "$T_TMP/folded" "B;C $K"$'\n'"D;C $(((K + 2) / 3))" \
	"FAY_UNWIND=fp (no table): the caller exact, the rest cut ($K and $(((K + 2) / 3)))"

# ---- a kernel stack, auto mode -----------------------------------------------------------
fq --probe-mode=inline --json -c "$FP calls 30" \
	"from f in function(\"$FP:C\") group f by f.kstack into g select { stack: g.key, n: g.count() }"
same "$T_TMP/out" '{"stack":"[no kernel stack: EFAULT]","n":40}' \
	"inline s.kstack: there is no kernel stack in a process (as a uprobe's says)"
timeout 60 "$FAY" run --json --query "from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	-- "$FP" calls $K >"$T_TMP/out" 2>"$T_TMP/err"
ok "fay run, auto mode: a stack key runs inline now ($(head -1 "$T_TMP/err"))" \
	grep -q ': inline (C' "$T_TMP/err"
ok "... with the same stacks" grep -q '"stack":"[^"]*;main;A;D;C","n":200' "$T_TMP/out"

# ---- signals into probes: no frame of the runtime ---------------------------------------
# inline_work signals: SIGUSR1 as fast as it can be sent, whose handler
# calls the probed function; many land inside a probe, and the handler's
# probe walks down through the interrupted one
W=$BUILD/tests/bin/inline_work
timeout 120 "$FAY" run --json --probe-mode=inline --query \
	"from f in function(\"$W:fay_inline_fn\") group f by f.ustack into g select { s: g.key, n: g.count() }" \
	-- "$W" signals 200000 >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
ok "signals into probes (rc $RC: $(grep -o 'signals [0-9]* in_probe [0-9]*' "$T_TMP/out")): every call counted, no frame of the runtime" \
	python3 - "$T_TMP/out" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
calls = int(re.search(r"calls (\d+) bad 0", text).group(1))
rows = [json.loads(l) for l in text.splitlines() if l.startswith("{")]
assert sum(r["n"] for r in rows) == calls, ("calls", calls, "counted", sum(r["n"] for r in rows))
# frame by frame: __libc_start_main, which the unwind table reaches, has
# "rt_" inside its name
for r in rows:
    assert r["s"].endswith(";fay_inline_fn") and \
        not any(f.startswith("rt_") or "libfay-probe" in f for f in r["s"].split(";")), r
# the handler's stacks: through the signal frame (libc's __restore_rt,
# an UNW_SIGNAL row) into the interrupted code down to main, or (the
# signal interrupted a probe) ending at the signal frame: nothing the
# runtime called in between; or the interrupted pc alone, where the walk
# cannot step on (a PLT stub: its rule is an expression, and no frame
# pointer; 1 of 22342 signals in one run)
for r in rows:
    f = r["s"].split(";")
    if "on_usr1" not in f:
        continue
    i = f.index("on_usr1")
    assert i >= 1 and f[i - 1].startswith("libc.so.6+"), r
    assert i <= 2 or (f[:3] == ["_start", "__libc_start_main", f[2]] and "main" in f[:i]), r
PY

# ---- a full table ------------------------------------------------------------------------
# stack_work tree 14: C under 2^14 = 16384 stacks of their own, in a
# table of 8192 (ENGINE_STACK_ENTRIES)
fq --probe-mode=inline --format folded -c "$FP tree 14" \
	"from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
ok "a full stack table: 8192 stacks named once each, the other 8192 calls under [lost]" \
	python3 - "$T_TMP/out" <<'PY'
import re, sys
rows = [l.rstrip("\n").rsplit(" ", 1) for l in open(sys.argv[1])]
n = {s: int(c) for s, c in rows}
assert sum(n.values()) == 16384, sum(n.values())
lost = n.pop("[lost]", 0)
assert lost == 16384 - len(n), (lost, len(n))
assert len(n) == 8192, len(n)
for s, c in n.items():
    assert c == 1 and re.fullmatch(r".*main;T(;[LR];T){14};C", s), (s, c)
PY

# ---- real programs without frame pointers ---------------------------------------------------
PY=/usr/bin/python3
D=$T_TMP/d
mkdir -p "$D"
head -c 200000 /dev/urandom | base64 >"$D/in.txt"
# real NAME FN OUT CMD...: fay run, inline, count() and the same counted
# by s.ustack, with the unwind table and without (FAY_UNWIND=fp): the
# same output file, the same total, rows that name FN; the table's
# stacks deeper on average than frame pointers' (DEEPER=1: by more than
# 2 frames) and reaching the program's root (ROOT=NAME among the 4
# outermost frames of the stacks of at least ROOT_SHARE of the calls;
# never in frame pointers' stacks)
real() {
	local name=$1 fn=$2 out=$3 a b c q
	shift 3
	for q in plain stack fpstack; do
		rm -f "$out"
		if [ $q = plain ]; then
			timeout 120 "$FAY" run --json --probe-mode=inline \
				--query "from f in function(\"$fn\") select { n: count() }" -- "$@" \
				>"$T_TMP/q.$q" 2>"$T_TMP/e.$q"
		else
			( [ $q = fpstack ] && export FAY_UNWIND=fp
			  exec timeout 120 "$FAY" run --json --probe-mode=inline \
				--query "from f in function(\"$fn\") group f by f.ustack(127) into g select { s: g.key, n: g.count() }" \
				-- "$@" ) >"$T_TMP/q.$q" 2>"$T_TMP/e.$q"
		fi
		RC=$?
		[ $RC -eq 0 ] && [ -s "$out" ] || { fail "$name, $q: rc $RC" "$(head -c 600 "$T_TMP/e.$q")"; return; }
		mv "$out" "$T_TMP/o.$q"
	done
	a=$(python3 -c 'import json,sys; print(sum(json.loads(l)["n"] for l in open(sys.argv[1]) if l.startswith("{")))' "$T_TMP/q.plain")
	b=$(python3 -c 'import json,sys; print(sum(json.loads(l)["n"] for l in open(sys.argv[1]) if l.startswith("{")))' "$T_TMP/q.stack")
	c=$(python3 -c 'import json,sys; print(sum(json.loads(l)["n"] for l in open(sys.argv[1]) if l.startswith("{")))' "$T_TMP/q.fpstack")
	if cmp -s "$T_TMP/o.plain" "$T_TMP/o.stack" && cmp -s "$T_TMP/o.plain" "$T_TMP/o.fpstack" &&
	   [ -n "$a" ] && [ "$a" -gt 0 ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] &&
	   grep -q ': inline (' "$T_TMP/e.stack" &&
	   python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert r and all(x["s"].split(";")[-1].endswith(sys.argv[2]) for x in r), r[:5]' "$T_TMP/q.stack" "${fn#*:}"; then
		pass "$name: same output and count ($a) with s.ustack, with the table and without, $(grep -c . "$T_TMP/q.stack") stacks, each ending in ${fn#*:}"
	else
		fail "$name: same output and count with s.ustack ($a vs $b vs $c)" "$(head -c 600 "$T_TMP/q.stack")" \
			"$(head -c 600 "$T_TMP/e.stack")"
		return
	fi
	[ -n "${DEEPER:-}" ] || return 0
	ok "$name: deeper stacks by the table than by frame pointers ($(depth "$T_TMP/q.stack") vs $(depth "$T_TMP/q.fpstack"))" \
		python3 - "$T_TMP/q.stack" "$T_TMP/q.fpstack" "${ROOT:-}" "${ROOT_SHARE:-0}" <<'PY'
import json, sys
def load(p):
    return [json.loads(l) for l in open(p) if l.startswith("{")]
def mean(r):
    return sum(len(x["s"].split(";")) * x["n"] for x in r) / sum(x["n"] for x in r)
t, f = load(sys.argv[1]), load(sys.argv[2])
assert mean(t) > mean(f) + 2, (mean(t), mean(f))
if sys.argv[3]:
    rooted = sum(x["n"] for x in t if sys.argv[3] in x["s"].split(";")[:4])
    share = rooted / sum(x["n"] for x in t)
    assert share >= float(sys.argv[4]), (sys.argv[3], share)
    assert not any(sys.argv[3] in x["s"] for x in f), "frame pointers reach the root?"
PY
}
# depth FILE: "mean M, max X frames" of a stack query's JSON rows
depth() {
	python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
d=[len(x["s"].split(";")) for x in r]
print("mean %.1f, max %d frames" % (sum(n*x["n"] for n,x in zip(d,r))/sum(x["n"] for x in r), max(d)))' "$1"
}
if [ -x $PY ]; then
	export PYTHONHASHSEED=0
	DEEPER=1 real "python3 (no frame pointers), libc malloc" libc:malloc "$D/pm" $PY -c "
import json, sys
d = [json.dumps({'k': i, 'v': list(range(i % 50))}) for i in range(20000)]
open(sys.argv[1], 'w').write(str(sum(len(x) for x in d)))" "$D/pm"
	# _json, an extension module python dlopen()s at the import: fay
	# sends the runtime a new table once the process's maps changed
	# (the stack tick, 50 ms: the sleep lets it come before the work),
	# so its frames are stepped through to python's main too
	DEEPER=1 ROOT=Py_BytesMain ROOT_SHARE=0.99 \
		real "python3 json (an object loaded later), libc malloc" libc:malloc "$D/pj" $PY -c "
import json, sys, time
time.sleep(0.3)
d = [json.dumps({'k': i, 'v': list(range(i % 50))}) for i in range(20000)]
open(sys.argv[1], 'w').write(str(sum(len(x) for x in d)))
time.sleep(0.3)" "$D/pj"
	DEEPER=1 ROOT=Py_BytesMain ROOT_SHARE=0.99 \
		real "python3 zlib" libz:deflate "$D/pz" $PY -c "
import zlib, sys, time
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'w').write(' '.join(str(zlib.crc32(zlib.compress(d[i:i+9000]))) for i in range(0, 300000, 3000)))
time.sleep(0.5)	# the reader names the stacks of a process still there" "$D/in.txt" "$D/pz"
else
	diag "no $PY: its cases are not run"
fi
if command -v xz >/dev/null; then
	DEEPER=1 ROOT=__libc_start_main ROOT_SHARE=1 \
		real "xz (no frame pointers), lzma_code" liblzma:lzma_code "$D/in.txt.xz" xz -k -f "$D/in.txt"
else
	diag "no xz: its case is not run"
fi
done_testing
