// Hot: a JVM thread "hot" that spends three quarters of its time in
// Hot.hotA and a quarter in Hot.hotB, by the clock, for the record test.
// It prints "ready" once the thread runs, then reads stdin until EOF.
//
// Build: javac -d DIR Hot.java; run: java -cp DIR Hot
public class Hot {
    static volatile long sink;

    static void spinFor(long ns) {
        long end = System.nanoTime() + ns;
        long x = 1;
        while (System.nanoTime() < end) {
            x = x * 31 + 7;
        }
        sink = x;
    }

    static void hotA(long unit) {
        spinFor(3 * unit);
    }

    static void hotB(long unit) {
        spinFor(unit);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(() -> {
            // Units of 50-150 us at random: no period for a sampler to
            // alias with.
            java.util.Random r = new java.util.Random(1);
            while (true) {
                long unit = 50_000 + r.nextInt(100_000);
                hotA(unit);
                hotB(unit);
            }
        }, "hot");
        t.setDaemon(true);
        t.start();
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
