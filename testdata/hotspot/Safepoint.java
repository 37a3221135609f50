// Safepoint: a JVM stuck reaching a safepoint. "spinner" runs count, whose
// nested int loops C2 compiles without a safepoint poll (run with
// -XX:-UseCountedLoopSafepoints -Xbatch), for about 2^62 iterations; then
// "gc-caller" asks for a GC, which waits for a safepoint that never comes.
// Prints "ready" before the GC is asked for, then reads stdin until EOF
// (the test kills it: it cannot exit).
public class Safepoint {
    static volatile int sink;
    static volatile boolean spinning;

    static int count(int n) {
        int s = 0;
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < n; i++) {
                s += i ^ (s >>> 3);
            }
        }
        return s;
    }

    static void spinner() {
        for (int k = 0; k < 30_000; k++) {
            sink += count(50);
        }
        spinning = true;
        sink += count(Integer.MAX_VALUE);
    }

    static void gcCaller() {
        System.gc();
    }

    public static void main(String[] args) throws Exception {
        Thread s = new Thread(Safepoint::spinner, "spinner");
        s.setDaemon(true);
        s.start();
        while (!spinning) {
            Thread.sleep(10);
        }
        System.out.println("ready");
        System.out.flush();
        Thread g = new Thread(Safepoint::gcCaller, "gc-caller");
        g.setDaemon(true);
        g.start();
        while (System.in.read() >= 0) {
        }
    }
}
