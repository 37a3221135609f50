# Real-world test target for python3: the main thread blocks in input(),
# one thread waits on a threading.Event, one sleeps in time.sleep, one
# spins in a pure-Python loop. Prints "ready" when they are in place.
import threading, time

ev = threading.Event()
started = threading.Barrier(4)

def waiter():
    started.wait()
    ev.wait()

def sleeper():
    started.wait()
    time.sleep(100000)

def busy():
    started.wait()
    x = 0
    while True:
        x += 1

for f in (waiter, sleeper, busy):
    threading.Thread(target=f, daemon=True).start()
started.wait()
time.sleep(0.1)
print("ready", flush=True)
input()
