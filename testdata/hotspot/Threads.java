// Threads: a JVM whose threads wait in known Java methods, for the hotspot
// tests. It prints "ready" once every thread is where it will stay, then
// reads stdin until EOF.
//
// Build: javac -d DIR Threads.java; run: java -cp DIR Threads
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

public class Threads {
    static final Object waitLock = new Object();
    static final ReentrantLock juc = new ReentrantLock();
    static volatile long sink;
    static volatile boolean napping;

    static void sleepInner() throws InterruptedException {
        Thread.sleep(1_000_000_000L);
    }

    static void sleepOuter() throws InterruptedException {
        sleepInner();
    }

    static void napInner(long ms) throws InterruptedException {
        if (ms >= 0) {
            Thread.sleep(ms);
        } else {
            sink += ms;
        }
    }

    static void napOuter(long ms) throws InterruptedException {
        napInner(ms);
    }

    // napper warms up until it is compiled with napOuter and napInner
    // inlined (a 0 ms sleep now and then, so the call stays in the code),
    // then sleeps for good.
    static void napper() throws InterruptedException {
        for (int i = 0; ; i++) {
            long ms = i % 10_000 == 0 ? 0 : -1;
            if (i >= 2_000_000) {
                napping = true;
                ms = 1_000_000_000L;
            }
            napOuter(ms);
        }
    }

    static long mix(long x) {
        return x * 31 + (x >>> 7);
    }

    static void spin() {
        long x = 1;
        while (true) {
            x = mix(x);
            if (x == 42) {
                sink = x;
            }
        }
    }

    static void waitHere() throws InterruptedException {
        synchronized (waitLock) {
            waitLock.wait();
        }
    }

    static void lockHere() {
        juc.lock();
        juc.unlock();
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        juc.lock();
        start("sleeper", () -> {
            try { sleepOuter(); } catch (InterruptedException e) { }
        });
        start("spinner-\u00e9\u4e2d", Threads::spin);
        start("waiter", () -> {
            try { waitHere(); } catch (InterruptedException e) { }
        });
        Thread locker = start("locker", Threads::lockHere);
        Thread napper = start("napper", () -> {
            try { napper(); } catch (InterruptedException e) { }
        });
        while (locker.getState() != Thread.State.WAITING) {
            Thread.sleep(10);
        }
        while (!napping || napper.getState() != Thread.State.TIMED_WAITING) {
            Thread.sleep(10);
        }
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
