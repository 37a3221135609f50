# many.py N: N threads, each asleep 10 Python calls deep, then "ready".
import sys, threading, time

arrived = threading.Semaphore(0)


def deep(n):
    if n == 0:
        arrived.release()
        time.sleep(100000)
    else:
        deep(n - 1)


n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
for _ in range(n - 1):
    threading.Thread(target=deep, args=(10,), daemon=True).start()
for _ in range(n - 1):
    arrived.acquire()
print("ready", flush=True)
time.sleep(100000)
