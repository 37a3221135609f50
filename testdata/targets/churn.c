/* churn: creates and joins short-lived threads in a loop (churn_loop ->
 * pthread_create/join; each child runs child_fn and exits at once), while a
 * named thread "steady" stays blocked in steady_a -> steady_b -> read.
 * Prints "ready"; "s" prints "created N"; "q" exits.
 *
 * Build: gcc -O2 -g -pthread churn.c -o churn
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static atomic_long created;
static int pipefd[2];

NOINLINE static void *child_fn(void *arg) { KEEP(); return arg; }

NOINLINE static void churn_loop(void) {
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, NULL, child_fn, NULL) == 0) {
			pthread_join(t, NULL);
			atomic_fetch_add(&created, 1);
		}
	}
}
static void *churn_start(void *arg) { churn_loop(); return arg; }

NOINLINE static void steady_b(void) {
	char b;
	while (read(pipefd[0], &b, 1) != 0) {}
	KEEP();
}
NOINLINE static void steady_a(void) { steady_b(); KEEP(); }
static void *steady_start(void *arg) { steady_a(); return arg; }

int main(void) {
	pthread_t a, b;
	if (pipe(pipefd) != 0) return 1;
	pthread_create(&b, NULL, steady_start, NULL);
	pthread_setname_np(b, "steady");
	pthread_create(&a, NULL, churn_start, NULL);
	pthread_setname_np(a, "churner");
	while (atomic_load(&created) < 10) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'q') break;
		if (line[0] == 's') { printf("created %ld\n", atomic_load(&created)); fflush(stdout); }
	}
	return 0;
}
