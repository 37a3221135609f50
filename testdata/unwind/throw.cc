// Unwinder test target: a thread blocked in a function entered from a catch
// handler. Built by unwind's tests: g++ -O2 -fomit-frame-pointer -g -o throw throw.cc
#include <cstdio>
#include <stdexcept>
#include <unistd.h>

static int fd = -1;

__attribute__((noinline)) void blocker() {
	char b;
	if (read(fd, &b, 1) < 0) std::puts("read failed");
}

__attribute__((noinline)) void thrower(int x) {
	if (x) throw std::runtime_error("boom");
}

__attribute__((noinline)) void catcher(int x) {
	try {
		thrower(x);
	} catch (const std::exception &) {
		blocker();
	}
}

int main(int argc, char **) {
	int p[2];
	if (pipe(p) != 0) return 2;
	fd = p[0];
	std::printf("ready\n");
	std::fflush(stdout);
	catcher(argc);
	return 0;
}
