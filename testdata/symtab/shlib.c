/* Test library for symtab (see cprog.c). */
volatile int lib_sink;

static __attribute__((noinline)) int lib_local(int x) {
  lib_sink = x;
  return x + 3;
}

int lib_work(int x) { return lib_local(x) * 2; }

void *lib_local_addr(void) { return (void *)lib_local; }
