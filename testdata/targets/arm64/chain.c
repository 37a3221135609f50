/* chain: main -> c1 -> c2 -> c3, each with a frame record and no CFI
 * (built with -fno-asynchronous-unwind-tables -fno-unwind-tables). The
 * arm64 NT_FILE test lays out a stack of these frames in a hand-built
 * core; it is never run. */
__attribute__((noinline)) int c3(int x) { return x + 1; }
__attribute__((noinline)) int c2(int x) { return c3(x) * 2; }
__attribute__((noinline)) int c1(int x) { return c2(x) + 3; }
int main(int argc, char **argv) { (void)argv; return c1(argc); }
