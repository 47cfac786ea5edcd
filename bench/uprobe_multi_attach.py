#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attach and detach of a wildcard function() query (issue #27):
`function("libc:PATTERN")` on one process, through one uprobe.multi link
(Linux 6.6) vs a uprobe per function (FAY_NO_UPROBE_MULTI=1, the path
kernels without uprobe.multi take, and fay's only path before), and
bpftrace 0.17's `uprobe:libc:*` (a perf event per symbol) on the same
process, same run, medians (bpftrace with BENCH_BPFTRACE=1: one round,
it takes minutes, and 0.17 gave up on libc:* here after 3.5 min).

    make && sudo nice -n 10 bench/uprobe_multi_attach.py [ROUNDS]

attach: launch to fay's "attached" line (resolving the pattern in the
ELF symbols, code generation, load, attach), or to bpftrace's BEGIN
(which runs once every probe is attached); detach: SIGINT to the exit.
The process is `sleep` (mostly blocked: the sites are installed, not
hit).  Each fay round checks the attach line's function count."""
import os, re, signal, statistics, subprocess, sys, time

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.environ.get("FAY_BUILD", os.path.join(top, "build"))
fay = os.path.join(build, "fay")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
w = subprocess.Popen(["sleep", "3600"])
time.sleep(0.3)


def run(cmd, env, ready):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    note = ""
    for line in p.stdout:
        if ready(line):
            note = line.strip()
            break
    else:
        p.wait()
        sys.exit(f"{cmd[0]} never attached (rc {p.returncode})")
    t1 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=300)
    return t1 - t0, time.monotonic() - t1, note


def fay_one(pat, multi):
    env = dict(os.environ, FAY_NO_UPROBE_MULTI="0" if multi else "1")
    q = f'from f in function("libc:{pat}") select {{ n: count() }}'
    a, d, note = run([fay, "query", "-p", str(w.pid), q], env, lambda l: "attached" in l)
    m = re.search(r"(uprobe\S*) .*\((\d+) functions\)", note)
    if not m:
        sys.exit(f"no attach line: {note}")
    return a, d, f"{m.group(1)}, {m.group(2)} functions"


def bt_one(pat):
    prog = f'uprobe:{LIBC}:{pat} {{ @ = count(); }} BEGIN {{ printf("go\\n"); }}'
    # bpftrace 0.17 attaches each versioned alias too (7265 probes for
    # libc:*) and refuses more than 512 unless told
    env = dict(os.environ, BPFTRACE_MAX_PROBES="10000")
    return run(["bpftrace", "-p", str(w.pid), "-e", prog], env, lambda l: l.strip() == "go")


cases = [("[a-m]*", "multi", lambda: fay_one("[a-m]*", True)),
         ("[a-m]*", "uprobe each", lambda: fay_one("[a-m]*", False)),
         ("*", "multi", lambda: fay_one("*", True))]
if os.environ.get("BENCH_BPFTRACE"):	# fails here: see bench/RESULTS.md
    cases.append(("*", "bpftrace", lambda: bt_one("*")))
res = {(p, k): [] for p, k, _ in cases}
notes = {}
try:
    for r in range(rounds):
        for pat, kind, f in cases:
            if kind == "bpftrace" and r:
                continue	# minutes a round: once
            a, d, note = f()
            res[(pat, kind)].append((a, d))
            notes[(pat, kind)] = note
            print(f"round {r} libc:{pat} {kind}: attach {a * 1000:.0f} ms, detach {d * 1000:.0f} ms ({note})",
                  flush=True)
finally:
    w.kill()
print("| pattern | mechanism | attach (median) | detach (median) | rounds |")
print("|---|---|---|---|---|")
for pat, kind, _ in cases:
    v = res[(pat, kind)]
    print(f"| libc:{pat} | {kind}: {notes[(pat, kind)]} | {statistics.median(x[0] for x in v) * 1000:.0f} ms "
          f"| {statistics.median(x[1] for x in v) * 1000:.0f} ms | {len(v)} |")
