// Test target for symtab: C++ with namespaces, templates, lambdas and an
// always-inlined function. With an argument it prints "ready" and spins
// until killed, so tests can look at it while it runs.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

volatile int sink;

namespace outer {
namespace inner {

template <typename T>
struct Box {
  T v;
  __attribute__((noinline)) T twice(int k) const {
    sink = k;
    return v * 2 + k;
  }
};

inline __attribute__((always_inline)) int leaf_inline(int x) {
  sink = x * 3;
  int y = sink;
  return y + 1;
}

__attribute__((noinline)) int calls_inline(int x) {
  int r = leaf_inline(x);
  sink = r;
  return r + leaf_inline(r + sink);
}

template <typename F>
__attribute__((noinline)) int apply(F f, int x) {
  sink = x;
  return f(x) + 1;
}

}  // namespace inner
}  // namespace outer

__attribute__((noinline)) int spin(int n) {
  for (;;) {
    sink = n++;
    usleep(1000);
  }
}

int main(int argc, char **argv) {
  outer::inner::Box<long> b{argc};
  outer::inner::Box<int> c{argc + 1};
  auto lam = [&](int x) __attribute__((noinline)) { return x + (int)b.twice(x) + c.twice(x); };
  int r = outer::inner::apply(lam, argc);
  r += outer::inner::calls_inline(r);
  if (argc > 1) {
    printf("ready %d\n", r);
    fflush(stdout);
    spin(r);
  }
  return r == 12345;
}
