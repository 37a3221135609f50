/* Real-world test target: stacks that are not the thread's own.
 *   coro  runs a ucontext coroutine (makecontext/swapcontext, a malloc'ed
 *         stack) blocked in read(2): co_b <- co_a <- co_entry <-
 *         __start_context. Its stack is heap memory; nothing below
 *         __start_context belongs to it.
 *   alt   handles SIGUSR1 on a sigaltstack and blocks in read(2) there:
 *         alt_b <- alt_handler <- <signal frame> <- pause <- altv_b <-
 *         altv_a <- alt_thread <- start_thread.
 * Prints "ready" when both are in place; main blocks on stdin.
 * Build: gcc -O0 -g -fno-omit-frame-pointer -pthread coro.c (or -O2)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>
#include <unistd.h>
#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")
static int pfd[2];
static ucontext_t main_ctx, co_ctx;
static volatile int in_alt, in_co;
NOINLINE static void co_b(void) { char b; in_co = 1; if (read(pfd[0], &b, 1) < 0) perror("read"); KEEP(); }
NOINLINE static void co_a(void) { co_b(); KEEP(); }
NOINLINE static void co_entry(void) { co_a(); KEEP(); }
NOINLINE static void coro_thread_b(void) { swapcontext(&main_ctx, &co_ctx); KEEP(); }
static void *coro_thread(void *a) { (void)a; pthread_setname_np(pthread_self(), "coro"); coro_thread_b(); return 0; }
NOINLINE static void alt_b(void) { char b; in_alt = 1; if (read(pfd[0], &b, 1) < 0) perror("read"); KEEP(); }
NOINLINE static void alt_handler(int s) { (void)s; alt_b(); KEEP(); }
NOINLINE static void altv_b(void) { for (;;) pause(); }
NOINLINE static void altv_a(void) { altv_b(); KEEP(); }
static void *alt_thread(void *a) {
	stack_t ss = { .ss_sp = malloc(1 << 16), .ss_size = 1 << 16 };
	(void)a;
	sigaltstack(&ss, 0);
	pthread_setname_np(pthread_self(), "alt");
	altv_a();
	return 0;
}
int main(void) {
	char b;
	pthread_t t1, t2;
	struct sigaction sa = { .sa_handler = alt_handler, .sa_flags = SA_ONSTACK };
	if (pipe(pfd)) return 1;
	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = malloc(1 << 16);
	co_ctx.uc_stack.ss_size = 1 << 16;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, co_entry, 0);
	sigaction(SIGUSR1, &sa, 0);
	pthread_create(&t1, 0, coro_thread, 0);
	pthread_create(&t2, 0, alt_thread, 0);
	usleep(50000);
	pthread_kill(t2, SIGUSR1);
	while (!in_alt || !in_co) usleep(1000);
	usleep(20000);
	printf("ready\n");
	fflush(stdout);
	if (read(0, &b, 1) < 0) perror("read");
	return 0;
}
