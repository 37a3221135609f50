# hot.py: one thread runs hot_a (3 units of work) and hot_b (1 unit) in
# turn, forever, and counts the time it spends in each (perf_counter_ns:
# no system call, unlike thread_time_ns, which on a busy machine cost as
# much as hot_b); a line on stdin asks for those times ("a_ns b_ns").
# Prints "ready" first.
import sys, threading, time

spent = [0, 0]


def work(n):
    x = 0
    for i in range(n * 20000):
        x += i
    return x


def hot_a():
    return work(3)


def hot_b():
    return work(1)


def run():
    clock = time.perf_counter_ns
    while True:
        t0 = clock()
        hot_a()
        t1 = clock()
        hot_b()
        t2 = clock()
        spent[0] += t1 - t0
        spent[1] += t2 - t1


threading.Thread(target=run, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    print(spent[0], spent[1], flush=True)
