/* hot: CPU-bound targets for the profiler.
 *
 *   hot [exit_ms]        thread "worker" loops: hot_a for 3 ms, hot_b for
 *                        1 ms (75% / 25% of its time), main blocks in read;
 *                        exits by itself after exit_ms if given (> 0).
 *   hot spin N SECS      N threads "spin-K" count iterations of spin_work
 *                        for SECS seconds, then prints
 *                        "iters TOTAL maxstall_us MAX cpu_us CPU" (CPU: the
 *                        process's CPU time) and exits.
 *
 * Prints "ready" when running. Build: gcc -O2 -g -pthread hot.c -o hot
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

volatile unsigned long sink;

NOINLINE static void burn_until(long end) {
	while (now_ns() < end) {
		for (int i = 0; i < 200; i++) sink += i;
	}
	KEEP();
}
NOINLINE static void hot_a(void) { burn_until(now_ns() + 3000000L); KEEP(); }
NOINLINE static void hot_b(void) { burn_until(now_ns() + 1000000L); KEEP(); }

static void *worker(void *arg) {
	for (;;) {
		hot_a();
		hot_b();
	}
	return arg;
}

static atomic_long total;
static atomic_long maxstall;
static long spin_end;

NOINLINE static unsigned long spin_work(unsigned long x) {
	for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static void *spinner(void *arg) {
	unsigned long x = (unsigned long)arg, n = 0;
	long last = now_ns(), worst = 0;
	for (;;) {
		x = spin_work(x);
		n++;
		if ((n & 63) == 0) {
			long t = now_ns();
			if (t - last > worst) worst = t - last;
			last = t;
			if (t > spin_end) break;
		}
	}
	sink += x;
	atomic_fetch_add(&total, n);
	long cur = atomic_load(&maxstall);
	while (worst > cur && !atomic_compare_exchange_weak(&maxstall, &cur, worst)) {}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 3 && strcmp(argv[1], "spin") == 0) {
		int n = atoi(argv[2]);
		double secs = atof(argv[3]);
		pthread_t t[256];
		if (n > 256) n = 256;
		printf("ready\n");
		fflush(stdout);
		spin_end = now_ns() + (long)(secs * 1e9);
		for (int i = 0; i < n; i++) {
			char name[16];
			pthread_create(&t[i], NULL, spinner, (void *)(long)(i + 1));
			snprintf(name, sizeof name, "spin-%d", i);
			pthread_setname_np(t[i], name);
		}
		for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
		struct timespec cpu;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
		printf("iters %ld maxstall_us %ld cpu_us %ld\n", atomic_load(&total), atomic_load(&maxstall) / 1000,
		       cpu.tv_sec * 1000000L + cpu.tv_nsec / 1000);
		fflush(stdout);
		return 0;
	}
	long exit_ms = argc > 1 ? atol(argv[1]) : 0;
	pthread_t w;
	pthread_create(&w, NULL, worker, NULL);
	pthread_setname_np(w, "worker");
	printf("ready\n");
	fflush(stdout);
	if (exit_ms > 0) {
		usleep(exit_ms * 1000);
		return 0;
	}
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'q') break;
	}
	return 0;
}
