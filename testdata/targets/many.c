/* many: N threads (argv[1], default 64) named "w-NNN", each blocked in
 * work_a -> work_b -> pthread_cond_wait; argv[2] == "spin" makes them spin
 * in spin_a -> spin_b instead. Prints "ready" when all are in place; exits
 * on "q" or EOF on stdin.
 *
 * Build: gcc -O2 -g -pthread many.c -o many
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_int started;
static volatile int never;
volatile unsigned long counters[1024];

NOINLINE static void work_b(void) {
	pthread_mutex_lock(&mu);
	atomic_fetch_add(&started, 1);
	while (!never) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	KEEP();
}
NOINLINE static void work_a(void) { work_b(); KEEP(); }

NOINLINE static void spin_b(long i) {
	atomic_fetch_add(&started, 1);
	for (;;) counters[i & 1023]++;
}
NOINLINE static void spin_a(long i) { spin_b(i); KEEP(); }

/* Spinners wait at a gate until every thread exists, so creating them
 * does not compete with those already spinning (slow on a loaded
 * machine). */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;

static int spin;
static void *start(void *arg) {
	if (spin) {
		pthread_mutex_lock(&gate_mu);
		while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
		pthread_mutex_unlock(&gate_mu);
		spin_a((long)arg);
	} else work_a();
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 64;
	spin = argc > 2 && strcmp(argv[2], "spin") == 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (long i = 0; i < n; i++) {
		pthread_t t;
		char name[16];
		if (pthread_create(&t, &attr, start, (void *)i) != 0) { perror("pthread_create"); return 1; }
		snprintf(name, sizeof name, "w-%03ld", i);
		pthread_setname_np(t, name);
	}
	pthread_mutex_lock(&gate_mu);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
	while (atomic_load(&started) < n) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'q') break;
	}
	return 0;
}
