// crash: an aarch64 program that dies of a signal in a known state, for
// reading its core (built with aarch64-linux-gnu-gcc, run under
// qemu-aarch64-static, which writes the guest's core). A worker thread
// waits in pause() under worker_a -> worker_b -> leaf_wait; the main
// thread recurses 6 deep and faults, and its SIGSEGV handler aborts, so
// the core's main thread passes through the signal frame.
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int ready;

__attribute__((noinline)) void leaf_wait(void) { ready = 1; for (;;) pause(); }
__attribute__((noinline)) void worker_b(void) { leaf_wait(); __asm__ volatile(""); }
__attribute__((noinline)) void *worker_a(void *p) { worker_b(); __asm__ volatile(""); return p; }

__attribute__((noinline)) void on_segv(int sig) { (void)sig; abort(); }

__attribute__((noinline)) int recurse(int n) {
	if (n == 0) {
		*(volatile int *)(long)(n + 8) = 1; // fault
		return 0;
	}
	return recurse(n - 1) + 1;
}

int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_segv;
	sigaction(SIGSEGV, &sa, 0);
	pthread_t t;
	pthread_create(&t, 0, worker_a, 0);
	while (!ready)
		usleep(1000);
	usleep(20000); // let the worker reach pause()
	return recurse(5);
}
