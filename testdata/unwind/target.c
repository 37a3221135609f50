// Unwinder test target: known call chains blocked or spinning at known places.
// Built by unwind's tests, e.g.: gcc -O2 -fomit-frame-pointer -g -pthread -o target target.c
// Usage: target chain|threads|blocked|signal|recurse N|vdso|plt
// Prints "ready" on stdout once every thread has reached its place.
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static int blockfd = -1; // read end of a pipe nobody writes to
static volatile long sink;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int started;

static void ready(void) {
	printf("ready\n");
	fflush(stdout);
}

NOINLINE void c_read(void) {
	char buf[8];
	if (read(blockfd, buf, sizeof buf) < 0) sink++;
	sink++;
}
NOINLINE void b_read(void) { c_read(); sink++; }
NOINLINE void a_read(void) { b_read(); sink++; }

NOINLINE void t_sleep3(void) {
	struct timespec ts = {1000, 0};
	for (;;) nanosleep(&ts, NULL);
}
NOINLINE void t_sleep2(void) { t_sleep3(); sink++; }
NOINLINE void *t_sleep(void *arg) { __sync_fetch_and_add(&started, 1); t_sleep2(); return arg; }

NOINLINE void t_cond2(void) {
	pthread_mutex_lock(&mu);
	__sync_fetch_and_add(&started, 1);
	for (;;) pthread_cond_wait(&cv, &mu);
}
NOINLINE void *t_cond(void *arg) { t_cond2(); sink++; return arg; }

NOINLINE void h_wait(void) {
	sigset_t none;
	sigemptyset(&none);
	printf("handler\n");
	fflush(stdout);
	for (;;) sigsuspend(&none);
}
NOINLINE void handler(int sig) { h_wait(); sink += sig; }

NOINLINE int rec(int n) {
	volatile char pad[16];
	pad[0] = (char)n;
	if (n == 0) {
		ready();
		a_read();
		return pad[0];
	}
	rec(n - 1);
	return pad[0];
}

NOINLINE void v_spin3(void) {
	struct timespec ts;
	for (;;) { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }
}
NOINLINE void v_spin2(void) { v_spin3(); sink++; }
NOINLINE void *v_spin(void *arg) { __sync_fetch_and_add(&started, 1); v_spin2(); return arg; }

static const char *volatile pltstr = "hello, world";
NOINLINE void p_spin3(void) {
	for (;;) sink += strlen(pltstr) + abs((int)sink);
}
NOINLINE void p_spin2(void) { p_spin3(); sink++; }
NOINLINE void *p_spin(void *arg) { __sync_fetch_and_add(&started, 1); p_spin2(); return arg; }

// "blocked": one thread per blocking call of issue 6, each at a known chain.
NOINLINE void e_wait3(void) {
	struct epoll_event ev;
	int ep = epoll_create1(0);
	__sync_fetch_and_add(&started, 1);
	for (;;) epoll_wait(ep, &ev, 1, -1);
}
NOINLINE void e_wait2(void) { e_wait3(); sink++; }
NOINLINE void *e_wait(void *arg) { e_wait2(); return arg; }

NOINLINE void r_recv3(void) {
	int sv[2];
	char buf[8];
	struct timeval tv = {1000, 0};
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	__sync_fetch_and_add(&started, 1);
	for (;;) recv(sv[0], buf, sizeof buf, 0);
}
NOINLINE void r_recv2(void) { r_recv3(); sink++; }
NOINLINE void *r_recv(void *arg) { r_recv2(); return arg; }

NOINLINE void s_wait3(void) {
	sigset_t set;
	struct timespec ts = {1000, 0};
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	__sync_fetch_and_add(&started, 1);
	for (;;) sigtimedwait(&set, NULL, &ts);
}
NOINLINE void s_wait2(void) { s_wait3(); sink++; }
NOINLINE void *s_wait(void *arg) { s_wait2(); return arg; }

static void spawn(void *(*fn)(void *)) {
	pthread_t t;
	if (pthread_create(&t, NULL, fn, NULL) != 0) abort();
}

static void wait_started(int n) {
	while (started < n) usleep(1000);
	usleep(20000);
}

int main(int argc, char **argv) {
	int p[2];
	if (argc < 2 || pipe(p) != 0) return 2;
	blockfd = p[0];
	const char *mode = argv[1];
	if (!strcmp(mode, "chain")) {
		ready();
		a_read();
	} else if (!strcmp(mode, "threads")) {
		spawn(t_sleep);
		spawn(t_cond);
		wait_started(2);
		ready();
		a_read();
	} else if (!strcmp(mode, "blocked")) {
		spawn(t_sleep);
		spawn(t_cond);
		spawn(e_wait);
		spawn(r_recv);
		spawn(s_wait);
		wait_started(5);
		ready();
		a_read();
	} else if (!strcmp(mode, "signal")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = handler;
		sigaction(SIGUSR1, &sa, NULL);
		ready();
		a_read();
	} else if (!strcmp(mode, "recurse") && argc > 2) {
		rec(atoi(argv[2]));
	} else if (!strcmp(mode, "vdso")) {
		spawn(v_spin);
		wait_started(1);
		ready();
		a_read();
	} else if (!strcmp(mode, "plt")) {
		spawn(p_spin);
		wait_started(1);
		ready();
		a_read();
	}
	return 0;
}
