# idle.py: a Python program at rest: four workers wait for items on a
# queue.Queue (worker-0..3), one waits on a Condition (notified), one on
# an Event (setter), one in Semaphore.acquire at 0 (permit), main sleeps.
# No thread waits for a lock another holds. Prints "ready" once every
# waiter sleeps in futex(2), as its own /proc/self/task/TID/syscall says,
# three polls in a row.
import queue, threading, time

q, cond, event, sem = queue.Queue(), threading.Condition(), threading.Event(), threading.Semaphore(0)
tids = []


def worker():
    tids.append(threading.get_native_id())
    while True:
        q.get()


def notified():
    tids.append(threading.get_native_id())
    with cond:
        cond.wait()


def setter():
    tids.append(threading.get_native_id())
    event.wait()


def permit():
    tids.append(threading.get_native_id())
    sem.acquire()


def in_futex(tid):
    try:
        with open("/proc/self/task/%d/syscall" % tid) as f:
            return f.read().split()[0] == "202"
    except OSError:
        return False


for i in range(4):
    threading.Thread(target=worker, name="worker-%d" % i, daemon=True).start()
for fn in (notified, setter, permit):
    threading.Thread(target=fn, name=fn.__name__, daemon=True).start()
calm = 0
while calm < 3:
    time.sleep(0.01)
    calm = calm + 1 if len(tids) == 7 and all(in_futex(t) for t in tids) else 0
print("ready", flush=True)
time.sleep(100000)
