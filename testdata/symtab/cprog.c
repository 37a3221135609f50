/* Test target for symtab: a small C program linked against libshlib.so.
 * It prints the runtime addresses of a static function of its own and of
 * the library, then waits until killed (or exits at once with "exit"). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void *lib_local_addr(void);
int lib_work(int);

volatile int sink;

static __attribute__((noinline)) int prog_local(int x) {
  sink = x;
  return x * 7 + 1;
}

__attribute__((noinline)) int prog_global(int x) { return prog_local(x) + lib_work(x); }

int main(int argc, char **argv) {
  int r = prog_global(argc);
  printf("%p %p %d\n", (void *)prog_local, lib_local_addr(), r);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "exit") == 0)
    return 0;
  for (;;) {
    sink = r;
    usleep(10000);
  }
}
