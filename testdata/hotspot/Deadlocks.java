// Deadlocks: Java threads that deadlock on synchronized blocks (two in
// an ABBA cycle, three in a ring), one that waits for a monitor a
// sleeping thread holds (no cycle), and two in a ReentrantLock cycle. It
// prints "ready" once every thread is blocked where it will stay, then
// reads stdin until EOF.
//
// Build: javac -d DIR Deadlocks.java; run: java -cp DIR Deadlocks
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

public class Deadlocks {
    static class LockA { }
    static class LockB { }
    static class Ring { final int n; Ring(int n) { this.n = n; } }
    static class Held { }

    static final LockA a = new LockA();
    static final LockB b = new LockB();
    static final Ring[] ring = { new Ring(0), new Ring(1), new Ring(2) };
    static final Held held = new Held();
    static final ReentrantLock j1 = new ReentrantLock(), j2 = new ReentrantLock();

    static void both(Object first, Object second, CountDownLatch l) throws InterruptedException {
        synchronized (first) {
            l.countDown();
            l.await();
            synchronized (second) {
                System.out.println("never");
            }
        }
    }

    static void jucBoth(ReentrantLock first, ReentrantLock second, CountDownLatch l) throws InterruptedException {
        first.lock();
        l.countDown();
        l.await();
        second.lock();
    }

    static void holdAndSleep(CountDownLatch l) throws InterruptedException {
        synchronized (held) {
            l.countDown();
            Thread.sleep(1_000_000_000L);
        }
    }

    static void enterHeld() {
        synchronized (held) {
            System.out.println("never");
        }
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    interface Body { void run() throws InterruptedException; }

    static Runnable quiet(Body b) {
        return () -> { try { b.run(); } catch (InterruptedException e) { } };
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch ab = new CountDownLatch(2), r3 = new CountDownLatch(3), hl = new CountDownLatch(1), jl = new CountDownLatch(2);
        Thread[] blocked = {
            start("abba-1", quiet(() -> both(a, b, ab))),
            start("abba-2", quiet(() -> both(b, a, ab))),
            start("ring-0", quiet(() -> both(ring[0], ring[1], r3))),
            start("ring-1", quiet(() -> both(ring[1], ring[2], r3))),
            start("ring-2", quiet(() -> both(ring[2], ring[0], r3))),
            start("juc-1", quiet(() -> jucBoth(j1, j2, jl))),
            start("juc-2", quiet(() -> jucBoth(j2, j1, jl))),
        };
        start("holder", quiet(() -> holdAndSleep(hl)));
        hl.await();
        Thread enterer = start("enterer", Deadlocks::enterHeld);
        for (Thread t : blocked) {
            while (t.getState() != Thread.State.BLOCKED && t.getState() != Thread.State.WAITING) {
                Thread.sleep(10);
            }
        }
        while (enterer.getState() != Thread.State.BLOCKED) {
            Thread.sleep(10);
        }
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
