# gil.py: four threads ("spin-0".."spin-3") run pure-Python busy loops
# and compete for the GIL; main sleeps. Prints "ready spin-0=TID ...
# loop=LINE" (LINE: spin's "while True:", the loop's body the next).
import threading, time

tids = {}


def spin(name):
    tids[name] = threading.get_native_id()
    n = 0
    while True:
        n += 1


for i in range(4):
    name = "spin-%d" % i
    threading.Thread(target=spin, name=name, args=(name,), daemon=True).start()
while len(tids) < 4:
    time.sleep(0.01)
print("ready " + " ".join("%s=%d" % kv for kv in sorted(tids.items()))
      + " loop=%d" % (spin.__code__.co_firstlineno + 3), flush=True)
time.sleep(100000)
