// Many: a JVM with 40 threads of its own, each sleeping a few Java calls
// deep, for the dump benchmark. It prints "ready" once all sleep, then
// reads stdin until EOF.
//
// Build: javac -d DIR Many.java; run: java -cp DIR Many
public class Many {
    static void level(int n) throws InterruptedException {
        if (n == 0) {
            Thread.sleep(1_000_000_000L);
        } else {
            level(n - 1);
        }
    }

    public static void main(String[] args) throws Exception {
        Thread[] ts = new Thread[40];
        for (int i = 0; i < ts.length; i++) {
            final int depth = 3 + i % 8;
            ts[i] = new Thread(() -> {
                try { level(depth); } catch (InterruptedException e) { }
            }, "worker-" + i);
            ts[i].setDaemon(true);
            ts[i].start();
        }
        for (Thread t : ts) {
            while (t.getState() != Thread.State.TIMED_WAITING) {
                Thread.sleep(10);
            }
        }
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
