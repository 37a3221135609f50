# locks.py: threads blocked in each of the threading module's waits, each
# in a function of its own, main holding what they wait for:
#   lock: threading.Lock.acquire (take_lock); rlock: RLock.acquire
#   (take_rlock, main holds it); queue: queue.Queue.get on an empty queue
#   (take_item); put: Queue.put on a full one (put_item); cond:
#   Condition.wait (take_cond); sem: Semaphore.acquire at 0 (take_sem);
#   event: Event.wait (take_event); barrier: Barrier(2).wait, alone
#   (take_barrier); join: Thread.join of a sleeping thread (take_join).
# Prints "ready <json>" once every waiter sleeps in futex(2), as its own
# /proc/self/task/TID/syscall says, three polls in a row: each one's
# native id, "version" (major*100+minor), "rlock_id" (id() of the RLock).
import json, queue, sys, threading, time

lock, rlock, q = threading.Lock(), threading.RLock(), queue.Queue()
full = queue.Queue(maxsize=1)
full.put(0)
cond, sem, event = threading.Condition(), threading.Semaphore(0), threading.Event()
barrier = threading.Barrier(2)
ids = {}


def mark(name):
    ids[name] = threading.get_native_id()


def take_lock():
    mark("lock")
    lock.acquire()


def take_rlock():
    mark("rlock")
    rlock.acquire()


def take_item():
    mark("queue")
    q.get()


def put_item():
    mark("put")
    full.put(1)


def take_cond():
    mark("cond")
    with cond:
        cond.wait()


def take_sem():
    mark("sem")
    sem.acquire()


def take_event():
    mark("event")
    event.wait()


def take_barrier():
    mark("barrier")
    barrier.wait()


def take_join():
    mark("join")
    sleeper.join()


def in_futex(tid):
    try:
        with open("/proc/self/task/%d/syscall" % tid) as f:
            return f.read().split()[0] == "202"
    except OSError:
        return False


sleeper = threading.Thread(target=time.sleep, args=(100000,), daemon=True)
sleeper.start()
lock.acquire()
rlock.acquire()
fns = (take_lock, take_rlock, take_item, put_item, take_cond, take_sem, take_event, take_barrier, take_join)
for fn in fns:
    threading.Thread(target=fn, daemon=True).start()
# (three polls in a row: a waiter seen in futex(2) for the GIL instead
# would not stay there while main sleeps)
calm = 0
while calm < 3:
    time.sleep(0.01)
    calm = calm + 1 if len(ids) == len(fns) and all(in_futex(t) for t in ids.values()) else 0
ids["version"] = sys.version_info[0] * 100 + sys.version_info[1]
ids["rlock_id"] = id(rlock)
print("ready " + json.dumps(ids), flush=True)
time.sleep(100000)
