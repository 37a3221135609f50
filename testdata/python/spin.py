# spin.py SECS: one thread runs pure Python (work -> step -> add, three
# calls deep) for SECS seconds after printing "ready", then prints what it
# did: "iters N maxstall_us S cpu_us C" (N calls of work; S the longest
# gap between two of them, a stall; C the process's CPU time meanwhile)
# and exits. For measuring what a profiler costs a busy Python process.
import sys, time


def add(x, i):
    return x + i


def step(x, i):
    return add(x, i) ^ 1


def work():
    x = 0
    for i in range(200):
        x = step(x, i)
    return x


def main():
    secs = float(sys.argv[1])
    clock, cpu = time.perf_counter, time.process_time
    print("ready", flush=True)
    t0, c0 = clock(), cpu()
    end = t0 + secs
    iters, stall, last = 0, 0.0, t0
    while True:
        work()
        iters += 1
        now = clock()
        stall = max(stall, now - last)
        last = now
        if now >= end:
            break
    print("iters %d maxstall_us %d cpu_us %d" % (iters, stall * 1e6, (cpu() - c0) * 1e6), flush=True)


main()
