/* Fuzz seed for symtab: a tiny static program without libc, so the ELF
 * seeds stay small. */
static inline __attribute__((always_inline)) int twice(int x) { return 2 * x; }

__attribute__((noinline)) int work(int x) { return twice(x) + 1; }

void _start(void) {
  volatile int r = work(3);
  (void)r;
  for (;;)
    ;
}
