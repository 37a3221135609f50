# Real-world lock target for Debian's python3 and glibc's ld.so: thread
# "importer" waits for "go" on stdin (read by main), then imports a C
# extension, which dlopen()s it and so takes ld.so's recursive pthread
# mutex _rtld_global._dl_load_lock. The test makes the main thread hold
# that mutex first (gdb calls pthread_mutex_lock in it), so the import
# blocks in pthread_mutex_lock with main as the owner.
# Prints "ready main=TID importer=TID" once the importer waits for "go",
# and "going" when it has been let go.
import sys, threading

go = threading.Event()
tids = {}

def importer():
    tids["importer"] = threading.get_native_id()
    ready.set()
    go.wait()
    import _ctypes  # noqa: F401  (a dlopen under _dl_load_lock)

ready = threading.Event()
threading.Thread(target=importer, daemon=True).start()
ready.wait()
print("ready main=%d importer=%d" % (threading.get_native_id(), tids["importer"]), flush=True)
for line in sys.stdin:
    if line.strip() == "go":
        # Say so first: once let go, the importer blocks holding the GIL.
        print("going", flush=True)
        go.set()
