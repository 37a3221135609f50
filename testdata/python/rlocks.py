# rlocks.py: Python lock waits whose owners the program knows.
#   abba-1/abba-2: each holds one RLock and waits for the other's (a cycle);
#   ring-0..2: each holds RLock i and waits for RLock i+1 (a cycle of 3);
#   holder: holds an RLock twice and sleeps; held-wait waits for it;
#   lock-wait waits for a plain Lock that main holds (no owner recorded).
# Prints "ready k=tid ..." once every waiter sleeps in futex(2), as its
# own /proc/self/task/TID/syscall says, three polls in a row, then each
# RLock's id() (its address): "a=0x..." (abba-1 holds a), "b", "ring0"..,
# "held".
import threading, time

tids = {}


def mark(name):
    tids[name] = threading.get_native_id()


def cycle(name, first, second, barrier):
    first.acquire()
    barrier.wait()
    mark(name)
    second.acquire()


def holder(lock, taken):
    lock.acquire()
    lock.acquire()
    mark("holder")
    taken.set()
    time.sleep(100000)


def waiter(name, lock):
    mark(name)
    lock.acquire()


def start(name, fn, *args):
    threading.Thread(target=fn, name=name, args=args, daemon=True).start()


a, b = threading.RLock(), threading.RLock()
two = threading.Barrier(2)
start("abba-1", cycle, "abba-1", a, b, two)
start("abba-2", cycle, "abba-2", b, a, two)
ring = [threading.RLock() for _ in range(3)]
three = threading.Barrier(3)
for i in range(3):
    start("ring-%d" % i, cycle, "ring-%d" % i, ring[i], ring[(i + 1) % 3], three)
held, taken = threading.RLock(), threading.Event()
start("holder", holder, held, taken)
taken.wait()
start("held-wait", waiter, "held-wait", held)
plain = threading.Lock()
plain.acquire()
start("lock-wait", waiter, "lock-wait", plain)

waiters = ["abba-1", "abba-2", "ring-0", "ring-1", "ring-2", "held-wait", "lock-wait"]


def in_futex(tid):
    try:
        with open("/proc/self/task/%d/syscall" % tid) as f:
            return f.read().split()[0] == "202"
    except OSError:
        return False


# (three polls in a row: a waiter seen in futex(2) for the GIL instead
# would not stay there while main sleeps)
calm = 0
while calm < 3:
    time.sleep(0.01)
    calm = calm + 1 if all(w in tids and in_futex(tids[w]) for w in waiters) else 0
locks = {"a": a, "b": b, "ring0": ring[0], "ring1": ring[1], "ring2": ring[2], "held": held}
print("ready " + " ".join("%s=%d" % kv for kv in sorted(tids.items()))
      + "".join(" %s=%#x" % (k, id(v)) for k, v in locks.items()), flush=True)
time.sleep(100000)
