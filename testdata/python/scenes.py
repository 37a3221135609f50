# scenes.py: threads of CPython in known places, for stackshot's Python
# frame tests. It prints "ready <json>" once each is where it stays, with
# what the interpreter itself says of them (sys._current_frames() and
# threading.get_native_id()): per native thread id, the frames innermost
# first, each [co_name, co_qualname or co_name, co_filename, f_lineno].
# The thread named "busy" runs a pure-Python loop: its line moves.
# "pynames" is each thread's threading name by native thread id
# (threading.enumerate()): threads are named as a program names them,
# with non-ASCII names, a control character, and one renamed after its
# start.
import ctypes, json, socket, sys, threading, time

started = {}


def arrive(name):
    started[name] = threading.get_native_id()


def nap():
    time.sleep(100000)


def sleeper():
    arrive("sleeper")
    nap()


def receiver(sock):
    arrive("receiver")
    sock.recv(1)


def spin():
    arrive("busy")
    x = 0
    while True:
        x += 1


def produce():
    arrive("generator")
    time.sleep(100000)
    yield 1


def consume():
    for _ in produce():
        pass


async def co_inner():
    time.sleep(100000)


async def co_outer():
    arrive("coroutine")
    await co_inner()


def drive():
    co_outer().send(None)


def recurse(n):
    if n == 0:
        arrive("deep")
        time.sleep(100000)
    else:
        recurse(n - 1)


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def compare(a, b):
    arrive("callback")
    time.sleep(100000)
    return 0


def sort_with_callback():
    libc = ctypes.CDLL(None)
    arr = (ctypes.c_int * 2)(2, 1)
    libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), CMP(compare))


# A subinterpreter (3.12+) whose code sleeps in sub_wait: its frames are
# those of SUB (lines 4 and 5 of "<string>"), inside the main
# interpreter's frames of the thread that runs it.
SUB = "import time\n\ndef sub_wait():\n    time.sleep(100000)\nsub_wait()\n"
SUB_FRAMES = [["sub_wait", "sub_wait", "<string>", 4], ["<module>", "<module>", "<string>", 5]]


def subinterp():
    try:
        import _interpreters as interpreters
    except ImportError:
        import _xxsubinterpreters as interpreters
    interp = interpreters.create()
    arrive("subinterp")
    interpreters.run_string(interp, SUB)


class Holder:
    def wait_here(self):
        arrive("method")
        time.sleep(100000)


def describe(frame):
    out = []
    while frame is not None:
        co = frame.f_code
        out.append([co.co_name, getattr(co, "co_qualname", co.co_name), co.co_filename, frame.f_lineno])
        frame = frame.f_back
    return out


def settled(frames, names):
    """Each thread's innermost frame is where it blocks (the busy one aside)."""
    tops = {"sleeper": "nap", "receiver": "receiver", "generator": "produce", "coroutine": "co_inner",
            "deep": "recurse", "callback": "compare", "method": "wait_here", "main": "main_idle",
            "subinterp": "subinterp"}
    for name, tid in names.items():
        f = frames.get(tid)
        if name != "busy" and (f is None or f.f_code.co_name != tops[name]):
            return False
    return True


def reporter(main_ident):
    names = dict(started)
    by_native = {t.ident: t.native_id for t in threading.enumerate()}
    names["main"] = by_native[main_ident]
    while True:
        frames = {by_native.get(i): f for i, f in sys._current_frames().items()}
        if settled(frames, names):
            break
        time.sleep(0.01)
    want = {str(tid): describe(frames[tid]) for tid in names.values()}
    if "subinterp" in names:
        want[str(names["subinterp"])][:0] = SUB_FRAMES
    # (this thread ends once it has printed: not named)
    pynames = {str(t.native_id): t.name for t in threading.enumerate() if t is not threading.current_thread()}
    print("ready " + json.dumps({"threads": want, "names": {k: v for k, v in names.items()},
                                 "pynames": pynames, "version": sys.version.split()[0]}), flush=True)


def main_idle():
    time.sleep(100000)


def main():
    a, b = socket.socketpair()
    targets = [(sleeper, ()), (receiver, (a,)), (spin, ()), (consume, ()), (drive, ()),
               (recurse, (500,)), (sort_with_callback, ()), (Holder().wait_here, ())]
    if sys.version_info >= (3, 12):
        targets.append((subinterp, ()))
    # (the names: plain, numbered, non-ASCII, with an escape sequence and
    # a bell, the default "Thread-N (fn)", one renamed once started)
    names = ["worker-1", "worker-2", None, "na\u00efve-\u65e5\u672c", "esc\x1b[2J\x07bell", "to-rename", None, "Holder.wait"]
    threads = []
    for i, (fn, args) in enumerate(targets):
        t = threading.Thread(target=fn, args=args, daemon=True, name=names[i] if i < len(names) else None)
        t.start()
        threads.append(t)
    while len(started) < len(targets):
        time.sleep(0.01)
    threads[5].name = "renamed"
    threading.Thread(target=reporter, args=(threading.main_thread().ident,), daemon=True, name="reporter").start()
    main_idle()


if __name__ == "__main__":
    main()
