#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attach and detach of a function() query on a running process with 8
busy threads that fay did not start (issue #8): `fay query -p PID
--probe-mode=inline` (the first round loads libfay-probe.so with ptrace,
the note says in how long; later rounds find it loaded) vs `fay query -p
PID --probe-mode=uprobe` on the same process, same run, medians.

    make && sudo bench/bench_inline_attach.py [ROUNDS]

attach: fay's launch to its "attached" line (fay's own start, planning,
code generation, loading or connecting to the runtime, verifying and
JIT-compiling there, patching: everything a user waits for); detach:
SIGINT to fay's exit (the sites restored under 8 threads calling the
function, the final read, the exit).  Each round checks the count > 0 and
that the workload's threads still compute right at the end."""
import os, re, signal, statistics, subprocess, sys, tempfile, time

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.environ.get("FAY_BUILD", os.path.join(top, "build"))
fay, work = os.path.join(build, "fay"), os.path.join(build, "tests/bin/inline_work")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
tmp = tempfile.mkdtemp(prefix="fay-bench-attach.")
stop = os.path.join(tmp, "stop")
w = subprocess.Popen([work, "threads", "8", stop], stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
q = f'from f in process({w.pid}).function("fay_inline_fn") select {{ n: count() }}'


def one(mode):
    t0 = time.monotonic()
    p = subprocess.Popen([fay, "query", "--json", "-p", str(w.pid), f"--probe-mode={mode}", q],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    note = ""
    for line in p.stderr:
        if "inline" in line or "uprobe" in line:
            note = note or line.strip()
        if "attached" in line:
            break
    else:
        sys.exit(f"{mode}: no attached line (rc {p.wait()})")
    t1 = time.monotonic()
    time.sleep(0.2)
    t2 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate()
    t3 = time.monotonic()
    n = re.search(r'"n":(\d+)', out)
    if p.returncode or not n or int(n.group(1)) == 0:
        sys.exit(f"{mode}: rc {p.returncode}, answer {out!r}")
    m = re.search(r"loaded with ptrace in ([0-9.]+) ms", note)
    return (t1 - t0) * 1e3, (t3 - t2) * 1e3, float(m.group(1)) if m else None


res = {"inline": [], "uprobe": []}
load_ms = None
for r in range(rounds):
    for mode in ("inline", "uprobe"):
        a, d, l = one(mode)
        res[mode].append((a, d))
        if l is not None:
            load_ms = l
open(stop, "w").close()
out, _ = w.communicate()
if w.returncode != 0 or " bad 0" not in out:
    sys.exit(f"the workload: rc {w.returncode}, {out!r}")
la = open("/proc/loadavg").read().split()[:3]
print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; {os.cpu_count()} CPUs; load: {' '.join(la)}")
print(f"workload: inline_work threads 8 (started without fay): {out.strip()}")
print(f"runtime loaded with ptrace (first inline round): {load_ms} ms")
for mode in ("inline", "uprobe"):
    a = [x[0] for x in res[mode]]
    d = [x[1] for x in res[mode]]
    print(f"{mode}: attach median {statistics.median(a):.1f} ms (rounds {' '.join('%.1f' % x for x in a)}); "
          f"detach median {statistics.median(d):.1f} ms (rounds {' '.join('%.1f' % x for x in d)})")
