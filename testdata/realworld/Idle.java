// Real-world test target for the JVM: thread "spinner" spins in Java code
// (JIT-compiled, frame pointers, no CFI), thread "sleeper" sleeps, the main
// thread blocks reading stdin. Prints "ready" when they are started.
// Run with the source launcher: java Idle.java
public class Idle {
	static void spin() {
		long x = 0;
		for (;;) {
			x++;
			if (x == -1) System.out.println(x);
		}
	}

	public static void main(String[] a) throws Exception {
		Thread t = new Thread(Idle::spin, "spinner");
		t.setDaemon(true);
		t.start();
		Thread s = new Thread(() -> {
			try {
				Thread.sleep(100000000);
			} catch (Exception e) {
			}
		}, "sleeper");
		s.setDaemon(true);
		s.start();
		Thread.sleep(500);
		System.out.println("ready");
		System.in.read();
	}
}
