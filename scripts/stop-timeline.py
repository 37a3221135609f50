#!/usr/bin/env python3
"""Where a ptrace stop's time goes, for one thread of a target.

Usage (as root, perf installed):
    scripts/stop-timeline.py BIN PID TID [MODE [RUNS]]

Runs `BIN --mode MODE PID` RUNS times (default: stop, 40) under
`perf record -a` with the scheduler and syscall tracepoints, then splits
every stop of thread TID into: the interrupt reaching the thread (it runs
its own code until it goes off CPU in the traced state), the tracer's
wake-up in wait4, the tracer's work (GETREGSET, stack copy, detach), and
the thread's wait for a CPU after the detach. Prints median and maximum
of each, in microseconds. A development tool: figures depend on the
machine's load, so say what it was (uptime) when quoting them.
"""
import re
import statistics
import subprocess
import sys
import tempfile
import time

PTRACE_INTERRUPT, PTRACE_GETREGSET, PTRACE_DETACH = 0x4207, 0x4204, 0x11


def record(binary, pid, mode, runs, out):
    loop = "for i in $(seq %d); do %s --mode %s %d >/dev/null; sleep 0.05; done" % (runs, binary, mode, pid)
    subprocess.run(["perf", "record", "-q", "-a", "-o", out,
                    "-e", "sched:sched_switch", "-e", "sched:sched_wakeup",
                    "-e", "syscalls:sys_enter_ptrace", "-e", "syscalls:sys_exit_wait4",
                    "--", "sh", "-c", loop], check=True)


def events(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    ev = []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if m:
            ev.append((float(m.group(2)) * 1e6, int(m.group(1)), m.group(3), m.group(4)))
    ev.sort()
    return ev


def stops(ev, tid):
    hexpid = "pid: 0x%08x" % tid
    res, cur = [], None
    for t, who, e, tr in ev:
        if e.startswith("syscalls:sys_enter_ptrace") and hexpid in tr:
            req = int(re.search(r"request: (0x[0-9a-f]+)", tr).group(1), 16)
            if req == PTRACE_INTERRUPT:
                cur = {"int": t, "tracer": who}
            elif cur and req == PTRACE_GETREGSET:
                cur["regs"] = t
            elif cur and req == PTRACE_DETACH:
                cur["detach"] = t
        elif not cur:
            continue
        elif e.startswith("syscalls:sys_exit_wait4") and who == cur["tracer"] and "wait" not in cur:
            cur["wait"] = t
        elif (e == "sched:sched_switch" and "prev_pid=%d " % tid in tr and "stopped" not in cur
              and re.search(r"prev_state=t", tr)):
            cur["stopped"] = t
        elif e == "sched:sched_switch" and "next_pid=%d " % tid in tr and "detach" in cur:
            cur["run"] = t
            res.append(cur)
            cur = None
    return res


SPANS = [
    ("int", "stopped", "interrupt -> thread off CPU, traced (it runs until then)"),
    ("stopped", "wait", "thread stopped -> tracer's wait4 returns"),
    ("wait", "regs", "wait4 -> PTRACE_GETREGSET"),
    ("regs", "detach", "GETREGSET, stack copy -> PTRACE_DETACH"),
    ("detach", "run", "detach -> thread on a CPU again"),
    ("stopped", "run", "frozen: off CPU -> on CPU again"),
]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, pid, tid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "stop"
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    with tempfile.NamedTemporaryFile(suffix=".data") as f:
        with open("/proc/loadavg") as la:
            print("load before:", la.read().split()[0], "at", time.strftime("%H:%M:%S"))
        record(binary, pid, mode, runs, f.name)
        st = stops(events(f.name), tid)
    print("%d stops of thread %d (--mode %s)" % (len(st), tid, mode))
    for a, b, name in SPANS:
        v = [s[b] - s[a] for s in st if a in s and b in s]
        if v:
            print("%-58s median %7.0f us  max %7.0f us" % (name, statistics.median(v), max(v)))


if __name__ == "__main__":
    main()
