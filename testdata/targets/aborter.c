/* aborter: a program that aborts on request, for kernel core dumps.
 *
 * Threads: "waiter" waits in wait_a -> wait_b -> read(pipe nobody writes).
 * Main prints "ready", reads a line from stdin, answers "aborting", then
 * calls crash_a -> crash_b -> abort().
 *
 * Build: gcc -O1 -g -pthread aborter.c -o aborter
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static int pipefd[2];
static atomic_int started;

NOINLINE static void wait_b(void) {
	char b;
	atomic_store(&started, 1);
	while (read(pipefd[0], &b, 1) != 0) {
	}
	KEEP();
}
NOINLINE static void wait_a(void) { wait_b(); KEEP(); }
static void *start(void *arg) { (void)arg; wait_a(); return NULL; }

NOINLINE static void crash_b(void) { abort(); }
NOINLINE static void crash_a(void) { crash_b(); KEEP(); }

int main(void) {
	pthread_t t;
	char line[16];
	if (pipe(pipefd) != 0 || pthread_create(&t, NULL, start, NULL) != 0) return 1;
	pthread_setname_np(t, "waiter");
	while (!atomic_load(&started)) usleep(1000);
	usleep(20000);
	printf("ready\n");
	fflush(stdout);
	if (fgets(line, sizeof line, stdin) == NULL) return 0;
	printf("aborting\n");
	fflush(stdout);
	crash_a();
	return 0;
}
