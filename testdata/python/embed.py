# embed.py: run inside embed.c (or a python under another name); main
# sleeps in wait_here. Prints "ready tid=TID line=LINE version=V": LINE is
# the line of its sleep.
import sys, threading, time


def wait_here():
    line = wait_here.__code__.co_firstlineno + 3
    print("ready tid=%d line=%d version=%s" % (threading.get_native_id(), line, sys.version.split()[0]), flush=True)
    time.sleep(100000)


wait_here()
