# locks.py: a thread blocked in threading.Lock.acquire (in take_lock), one
# in RLock.acquire (in take_rlock), one in queue.Queue.get (in take_item);
# main holds both locks. Prints "ready <json>": the native id of each.
import json, queue, threading, time

lock, rlock, q = threading.Lock(), threading.RLock(), queue.Queue()
ids = {}


def take_lock():
    ids["lock"] = threading.get_native_id()
    lock.acquire()


def take_rlock():
    ids["rlock"] = threading.get_native_id()
    rlock.acquire()


def take_item():
    ids["queue"] = threading.get_native_id()
    q.get()


lock.acquire()
rlock.acquire()
for fn in (take_lock, take_rlock, take_item):
    threading.Thread(target=fn, daemon=True).start()
while len(ids) < 3:
    time.sleep(0.01)
print("ready " + json.dumps(ids), flush=True)
time.sleep(100000)
