#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_query: fay query against bpftrace, in the same run (root).

  (a) per-event added cost of counting one system call grouped by comm:
        fay:      from s in syscall("getppid") group s by s.comm into g
                  select { comm: g.key, n: g.count() }
        bpftrace: tracepoint:syscalls:sys_enter_getppid { @[comm] = count(); }
  (b) per-event added cost of a latency histogram of a user function
      (entry + exit, paired per thread):
        fay:      from f in function("W:fay_work_lat") select { h: hist(f.duration) }
        bpftrace: uprobe { @s[tid] = nsecs } uretprobe { @h = hist(nsecs - @s[tid]); delete(@s[tid]) }
  Also the time the generated programs themselves run per event, as the
  kernel times them (bpf_stats, enabled only for those extra sessions):
  the code each tool generates, without the probe's own cost.
  (c) time from launch to probes attached:
        - as each tool reports it (fay: its "probes attached" line;
          bpftrace: its BEGIN probe, which runs once everything is attached);
        - to the first event seen (both stream one row for a getppid() of
          a process that calls it in a loop): the same yardstick for both.

Per-event cost = (loop time traced - loop time untraced) / K, with the
untraced loop run right before and after each tracer session (--reps
times each; the fastest run of each kind: on a shared machine other
processes only add time).  The primary figure is the CPU time of the traced
process (CLOCK_PROCESS_CPUTIME_ID: the probes run in its context, and
what other processes of a busy machine take is not counted); wall-clock
time is printed too.  Rounds interleave fay and bpftrace; medians of
--runs rounds.  Every tracer session checks that the tool counted
exactly the events of its runs.

usage: bench_query.py [--runs R] [--reps N] [--syscalls K] [--calls K]
                      [--fay PATH] [--work PATH]
"""
import argparse
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def workload(work, mode, k, extra=()):
    """(wall ns, CPU ns) of the workload's loop."""
    env = dict(os.environ, QW_TIME="1")
    out = subprocess.run([work, mode, str(k), *extra], env=env, check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"loop_ns (\d+) cpu_ns (\d+)", out)
    return int(m.group(1)), int(m.group(2))


def wait_line(proc, stream, pattern, timeout=60.0):
    """Read stream until a line matches pattern; returns (time, lines)."""
    end = time.monotonic() + timeout
    buf, lines = "", []
    fd = stream.fileno()
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(fd, 65536).decode(errors="replace")
        if not chunk:
            break
        buf += chunk
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            lines.append(line)
            if re.search(pattern, line):
                return time.monotonic(), lines
    raise RuntimeError("no line matching %r (got %r)" % (pattern, lines[-5:]))


class Tracer:
    """A fay query or a bpftrace program, started and waited for."""

    def __init__(self, tool, fay, text):
        self.tool = tool
        if tool == "fay":
            self.argv = [fay, "query", text]
            self.ready = r"probes? attached"
        else:
            self.argv = ["bpftrace", "-e", 'BEGIN { printf("ready\\n"); } ' + text]
            self.ready = r"^ready"
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        stream = self.p.stderr if tool == "fay" else self.p.stdout
        self.t_ready, _ = wait_line(self.p, stream, self.ready)

    def prog_ids(self):
        """The kernel ids of the BPF programs the tool holds (fdinfo)."""
        ids = set()
        d = "/proc/%d/fdinfo" % self.p.pid
        for fd in os.listdir(d):
            try:
                m = re.search(r"^prog_id:\s*(\d+)", open(os.path.join(d, fd)).read(), re.M)
            except OSError:
                continue
            if m:
                ids.add(int(m.group(1)))
        return ids

    def setup_s(self):
        return self.t_ready - self.t0

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        # bpftrace can take minutes to remove uprobes on a busy machine
        out, err = self.p.communicate(timeout=600)
        return out.decode(errors="replace") + err.decode(errors="replace")


def count_in(tool, out, key):
    if tool == "fay":
        m = re.search(r"^%s\s+(\d+)\s*$" % re.escape(key), out, re.M)
    else:
        m = re.search(r"^@\[%s\]: (\d+)" % re.escape(key), out, re.M)
    return int(m.group(1)) if m else -1


def hist_total(out):
    """Sum of the counts of hist bars (fay and bpftrace draw them alike)."""
    return sum(int(m.group(1)) for m in re.finditer(r"^\s*[\[(].*?\s(\d+)\s+\|", out, re.M))


def per_event(args, tool, case):
    """One traced run: (ns added per event, set-up seconds)."""
    w = args.work
    if case == "syscall":
        k = args.syscalls
        text = ('from s in syscall("getppid") group s by s.comm into g '
                'select { comm: g.key, n: g.count() }' if tool == "fay" else
                'tracepoint:syscalls:sys_enter_getppid { @[comm] = count(); }')
        mode = "getppid"
    else:
        k = args.calls
        text = ('from f in function("%s:fay_work_lat") select { h: hist(f.duration) }' % w
                if tool == "fay" else
                'uprobe:%s:fay_work_lat { @s[tid] = nsecs; } '
                'uretprobe:%s:fay_work_lat /@s[tid]/ { @h = hist(nsecs - @s[tid]); '
                'delete(@s[tid]); }' % (w, w))
        mode = "lat"
    base = [workload(w, mode, k) for _ in range(args.reps)]
    tr = Tracer(tool, args.fay, text)
    traced = [workload(w, mode, k) for _ in range(args.reps)]
    out = tr.stop()
    base += [workload(w, mode, k) for _ in range(args.reps)]
    got = count_in(tool, out, "query_work") if case == "syscall" else hist_total(out)
    if got != k * args.reps:
        raise RuntimeError("%s counted %d events, not %d:\n%s" % (tool, got, k * args.reps,
                                                                 out[-2000:]))
    # Other processes only ever add time: the fastest runs are the least
    # disturbed ones, traced and untraced alike.
    wall = (min(t[0] for t in traced) - min(b[0] for b in base)) / k
    cpu = (min(t[1] for t in traced) - min(b[1] for b in base)) / k
    return cpu, wall, tr.setup_s()


STATS = "/proc/sys/kernel/bpf_stats_enabled"


def prog_stats(ids):
    """Total (run_time_ns, run_cnt) of programs ids (bpf_stats)."""
    t = n = 0
    for i in ids:
        out = subprocess.run(["bpftool", "prog", "show", "id", str(i)], capture_output=True,
                             text=True).stdout
        m = re.search(r"run_time_ns (\d+) run_cnt (\d+)", out)
        if m:
            t += int(m.group(1))
            n += int(m.group(2))
    return t, n


def kernel_timed(args, tool, case):
    """ns the tool's programs run per event, as the kernel times them
    (bpf_stats: only the generated code, not the probe's trap)."""
    w = args.work
    k = args.syscalls if case == "syscall" else args.calls
    text = {
        ("fay", "syscall"): 'from s in syscall("getppid") group s by s.comm into g '
                            'select { comm: g.key, n: g.count() }',
        ("bpftrace", "syscall"): 'tracepoint:syscalls:sys_enter_getppid { @[comm] = count(); }',
        ("fay", "uprobe"): 'from f in function("%s:fay_work_lat") select { h: hist(f.duration) }' % w,
        ("bpftrace", "uprobe"): 'uprobe:%s:fay_work_lat { @s[tid] = nsecs; } uretprobe:%s:fay_work_lat '
                                '/@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }' % (w, w),
    }[(tool, case)]
    tr = Tracer(tool, args.fay, text)
    ids = tr.prog_ids()
    t0, n0 = prog_stats(ids)
    workload(w, "getppid" if case == "syscall" else "lat", k)
    t1, _ = prog_stats(ids)
    tr.stop()
    return (t1 - t0) / k


def first_event(args, tool):
    """Seconds from launch to the first event of a process in a getppid loop."""
    spin = subprocess.Popen([args.work, "getppid", "2000000000"])
    try:
        if tool == "fay":
            argv = [args.fay, "query", "-q",
                    'from s in syscall("getppid") where s.pid == %d select { p: s.pid }' % spin.pid]
        else:
            argv = ["bpftrace", "-e", 'tracepoint:syscalls:sys_enter_getppid /pid == %d/ '
                    '{ printf("%%d\\n", pid); exit(); }' % spin.pid]
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        t1, _ = wait_line(p, p.stdout, r"^\s*%d\s*$" % spin.pid)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
        return t1 - t0
    finally:
        spin.kill()
        spin.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--syscalls", type=int, default=200000, help="getppid() per run")
    ap.add_argument("--calls", type=int, default=5000, help="user-function calls per run")
    ap.add_argument("--reps", type=int, default=5,
                    help="workload runs per tracer session (and untraced around it)")
    build = os.environ.get("FAY_BUILD", os.path.join(TOP, "build"))
    ap.add_argument("--fay", default=os.path.join(build, "fay"))
    ap.add_argument("--work", default=os.path.join(build, "tests/bin/query_work"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_query: needs root (loads BPF programs)")
    for f in (args.fay, args.work):
        if not os.access(f, os.X_OK):
            sys.exit("bench_query: %s is not built (make)" % f)

    res = {(t, c): [] for t in ("fay", "bpftrace") for c in ("syscall", "uprobe")}
    wall = {(t, c): [] for t in ("fay", "bpftrace") for c in ("syscall", "uprobe")}
    setup = {"fay": [], "bpftrace": []}
    first = {"fay": [], "bpftrace": []}
    for r in range(args.runs):
        order = ("fay", "bpftrace") if r % 2 == 0 else ("bpftrace", "fay")
        for case in ("syscall", "uprobe"):
            for tool in order:
                cpu, w, s = per_event(args, tool, case)
                res[(tool, case)].append(cpu)
                wall[(tool, case)].append(w)
                setup[tool].append(s)
        for tool in order:
            first[tool].append(first_event(args, tool))
        print("round %d/%d: CPU ns/event: syscall fay %.1f bpftrace %.1f; uprobe fay %.0f "
              "bpftrace %.0f; first event fay %.3f bpftrace %.3f s" % (
                  r + 1, args.runs, res[("fay", "syscall")][-1], res[("bpftrace", "syscall")][-1],
                  res[("fay", "uprobe")][-1], res[("bpftrace", "uprobe")][-1],
                  first["fay"][-1], first["bpftrace"][-1]), file=sys.stderr)

    med = statistics.median
    print("bench_query: %d rounds, medians; %d getppid() and %d user-function calls per "
          "workload run, %d runs per tracer session" % (args.runs, args.syscalls, args.calls,
                                                         args.reps))
    print("%-56s %11s %11s %8s" % ("", "fay", "bpftrace", "ratio"))
    for case, what in (("syscall", "(a) count getppid by comm"),
                       ("uprobe", "(b) hist of a user function's latency")):
        for name, tab in (("CPU ns added per event", res), ("wall ns added per event", wall)):
            f, b = med(tab[("fay", case)]), med(tab[("bpftrace", case)])
            print("%-56s %11.1f %11.1f %7.2fx" % ("%s: %s" % (what, name), f, b,
                                                   f / b if b else float("nan")))
    old = open(STATS).read().strip()
    kt = {(t, c): [] for t in ("fay", "bpftrace") for c in ("syscall", "uprobe")}
    try:
        open(STATS, "w").write("1")
        for r in range(args.runs):
            for case in ("syscall", "uprobe"):
                for tool in (("fay", "bpftrace") if r % 2 == 0 else ("bpftrace", "fay")):
                    kt[(tool, case)].append(kernel_timed(args, tool, case))
    finally:
        open(STATS, "w").write(old)
    for case, what in (("syscall", "(a) count getppid by comm"),
                       ("uprobe", "(b) hist of a user function's latency")):
        f, b = med(kt[("fay", case)]), med(kt[("bpftrace", case)])
        print("%-56s %11.1f %11.1f %7.2fx" % ("%s: BPF program ns per event (bpf_stats)" % what,
                                               f, b, f / b if b else float("nan")))
    f, b = med(setup["fay"]), med(setup["bpftrace"])
    print("%-56s %11.3f %11.3f %7.3fx" % ("(c) launch to attached, as each reports it: s", f, b, f / b))
    f, b = med(first["fay"]), med(first["bpftrace"])
    print("%-56s %11.3f %11.3f %7.3fx" % ("(c) launch to the first event seen: s", f, b, f / b))
    # What the binaries cost before they do anything: process start.
    starts = {}
    for tool, argv in (("fay", [args.fay, "--version"]), ("bpftrace", ["bpftrace", "--version"])):
        ts = []
        for _ in range(max(5, args.runs)):
            t0 = time.monotonic()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ts.append(time.monotonic() - t0)
        starts[tool] = med(ts)
    print("%-56s %11.3f %11.3f %7.3fx" % ("    of which process start (--version): s",
                                          starts["fay"], starts["bpftrace"],
                                          starts["fay"] / starts["bpftrace"]))


if __name__ == "__main__":
    main()
