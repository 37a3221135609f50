// Jni: a thread whose native method (jni.c, loaded from the path in
// args[0]) calls back into Java, which sleeps: Java, then the C frame,
// then Java again on one stack. Prints "ready" once the callback sleeps,
// then reads stdin until EOF.
//
// Build: javac -d DIR Jni.java; gcc -shared -fPIC -g -I$JAVA_HOME/include
// -I$JAVA_HOME/include/linux -o libjnicb.so jni.c; run: java -cp DIR Jni libjnicb.so
public class Jni {
    static volatile boolean sleeping;

    static native void callBack();

    static void sleepy() throws InterruptedException {
        sleeping = true;
        Thread.sleep(1_000_000_000L);
    }

    static void outer() {
        callBack();
    }

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        Thread t = new Thread(Jni::outer, "jni-caller");
        t.setDaemon(true);
        t.start();
        while (!sleeping) {
            Thread.sleep(10);
        }
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
