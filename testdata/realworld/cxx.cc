// Real-world test target: C++ built with g++ -O2: namespaces, templates,
// lambdas, std::function and a block reached from inside a catch handler.
// Threads "lambda" and "catcher", and the main thread, block in read(2)
// on a pipe nobody writes. Prints "ready" when in place.
// Built by cmd/stackshot's realworld tests: g++ -O2 -g -pthread cxx.cc
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>
#include <pthread.h>
#include <unistd.h>

namespace app {
template <typename T> struct Box {
	T v;
	__attribute__((noinline)) T wait(int fd) {
		char b;
		if (read(fd, &b, 1) < 0) perror("read");
		__asm__ volatile("" ::: "memory");
		return v;
	}
};
__attribute__((noinline)) void thrower(int x) {
	if (x > 0) throw std::runtime_error("on purpose");
}
__attribute__((noinline)) int in_catch(int fd) {
	try {
		thrower(fd + 1);
	} catch (const std::exception &) {
		Box<long> b{3};
		return (int)b.wait(fd);
	}
	return 0;
}
} // namespace app

static int pfd[2];

int main() {
	if (pipe(pfd)) return 1;
	std::vector<std::thread> ts;
	ts.emplace_back([] {
		pthread_setname_np(pthread_self(), "lambda");
		auto f = [](int fd) { return app::Box<int>{1}.wait(fd); };
		f(pfd[0]);
	});
	ts.emplace_back([] {
		pthread_setname_np(pthread_self(), "catcher");
		app::in_catch(pfd[0]);
	});
	std::function<void()> fn = [] {
		app::Box<double> d{2.0};
		d.wait(pfd[0]);
	};
	usleep(100000);
	printf("ready\n");
	fflush(stdout);
	fn();
	for (auto &t : ts) t.join();
}
