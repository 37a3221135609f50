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

    static void hotA() {
        spinFor(3_000_000);
    }

    static void hotB() {
        spinFor(1_000_000);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(() -> {
            while (true) {
                hotA();
                hotB();
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
