/* Real-world test target: thread "victim" spins in victim_a -> victim_b,
 * is sent SIGUSR1, and its handler blocks in read(2):
 * handler_b <- handler <- <signal frame> <- victim_b <- victim_a <- victim
 * <- start_thread. Prints "ready" when in place; main blocks on stdin.
 * Build: gcc -O2 -g -pthread sighandler.c (or -O0 -fno-omit-frame-pointer)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")
static int pfd[2];
static volatile int spin = 1, in_handler;
NOINLINE static void handler_b(void) { char b; in_handler = 1; if (read(pfd[0], &b, 1) < 0) perror("read"); KEEP(); }
NOINLINE static void handler(int sig) { (void)sig; handler_b(); KEEP(); }
NOINLINE static void victim_b(void) { while (spin) KEEP(); }
NOINLINE static void victim_a(void) { victim_b(); KEEP(); }
static void *victim(void *a) { (void)a; pthread_setname_np(pthread_self(), "victim"); victim_a(); return 0; }
int main(void) {
	char b;
	pthread_t t;
	if (pipe(pfd)) return 1;
	signal(SIGUSR1, handler);
	pthread_create(&t, 0, victim, 0);
	usleep(50000);
	pthread_kill(t, SIGUSR1);
	while (!in_handler) usleep(1000);
	usleep(20000);
	printf("ready\n");
	fflush(stdout);
	if (read(0, &b, 1) < 0) perror("read");
	return 0;
}
