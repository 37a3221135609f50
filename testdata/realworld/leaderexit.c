/* Real-world test target: the main thread calls pthread_exit, so the
 * thread-group leader is a zombie while the process lives on in thread
 * "worker", blocked in read(2): worker_b <- worker_a <- worker <-
 * start_thread. Prints "ready" first.
 * Build: gcc -O2 -g -pthread leaderexit.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")
NOINLINE static void worker_b(void) { char b; if (read(0, &b, 1) < 0) perror("read"); KEEP(); }
NOINLINE static void worker_a(void) { worker_b(); KEEP(); }
static void *worker(void *a) { (void)a; pthread_setname_np(pthread_self(), "worker"); worker_a(); return 0; }
int main(void) {
	pthread_t t;
	pthread_create(&t, 0, worker, 0);
	usleep(50000);
	printf("ready\n");
	fflush(stdout);
	pthread_exit(0);
}
