// cxxlocks: C++ std::mutex deadlock ("cxx-a", "cxx-b") and a
// std::shared_mutex held for writing by "cxx-writer" while "cxx-reader"
// waits to read. Prints "ready NAME=TID ... m0=ADDR m1=ADDR sm=ADDR" once
// every thread is blocked in futex(2) past its flag; exits on EOF on stdin.
//
// Build: g++ -std=c++20 -O2 -g -pthread cxxlocks.cc -o cxxlocks
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <thread>

static std::mutex m0, m1;
static std::shared_mutex sm;
static std::binary_semaphore first_a{0}, first_b{0}, forever{0}, written{0};
static std::atomic<int> tids[4];
static std::atomic<int> blocking[4];

__attribute__((noinline)) static void take(std::mutex &m, int i) {
	blocking[i] = 1;
	std::lock_guard<std::mutex> g(m);
	asm volatile("" ::: "memory");
}

static bool in_futex(int tid) {
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f) return false;
	bool ok = fgets(buf, sizeof buf, f) && atoi(buf) == 202;
	fclose(f);
	return ok;
}

int main() {
	std::thread a([] {
		tids[0] = gettid();
		pthread_setname_np(pthread_self(), "cxx-a");
		m0.lock();
		first_a.release();
		first_b.acquire();
		take(m1, 0);
	});
	std::thread b([] {
		tids[1] = gettid();
		pthread_setname_np(pthread_self(), "cxx-b");
		first_a.acquire();
		m1.lock();
		first_b.release();
		take(m0, 1);
	});
	std::thread w([] {
		tids[2] = gettid();
		pthread_setname_np(pthread_self(), "cxx-writer");
		sm.lock();
		written.release();
		blocking[2] = 1;
		forever.acquire();
	});
	std::thread r([] {
		tids[3] = gettid();
		pthread_setname_np(pthread_self(), "cxx-reader");
		written.acquire();
		blocking[3] = 1;
		std::shared_lock<std::shared_mutex> g(sm);
	});
	for (int i = 0; i < 4; i++) {
		while (!blocking[i] || !tids[i]) usleep(200);
		while (!in_futex(tids[i])) usleep(200);
	}
	printf("ready cxx-a=%d cxx-b=%d cxx-writer=%d cxx-reader=%d m0=%p m1=%p sm=%p\n", tids[0].load(), tids[1].load(),
	       tids[2].load(), tids[3].load(), (void *)&m0, (void *)&m1, (void *)&sm);
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
	_exit(0);
}
