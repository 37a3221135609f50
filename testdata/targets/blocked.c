/* blocked: threads blocked at known call chains, counting EINTR.
 *
 * Threads (names set with pthread_setname_np):
 *   reader    reader_a -> reader_b -> reader_c -> read(pipe)
 *   condwait  cond_a -> cond_b -> cond_c -> pthread_cond_wait
 *   sleeper   sleep_a -> sleep_b -> sleep_c -> nanosleep
 *   epoller   epoll_a -> epoll_b -> epoll_c -> epoll_wait
 *   recver    recv_a -> recv_b -> recv_c -> recv (SO_RCVTIMEO set)
 *   sigwaiter sigw_a -> sigw_b -> sigw_c -> sigtimedwait
 *   jitter    jit_a -> jit_b -> nanosleep(random < 500us), then
 *             jit_b -> jit_work -> jit_leaf (busy)   only with "jitter"
 *   spinner   spin_a -> spin_b -> spin_c (busy loop)   only with argv[1] == "spin"
 *   busy-K    busyK_a -> busyK_b (busy loop), K = 0..3   only with "busy":
 *             with spin, five busy threads, more than a small machine's cores
 *   evloop    evloop -> epoll_wait, the thread's start routine itself   only
 *             with "evloop": built with frame pointers, its frame is found
 *             only through RBP, which epoll_wait's wrapper leaves alone and
 *             a read without a stop lacks
 *   main      main -> main_wait -> read(stdin)
 *
 * Protocol on stdin/stdout: prints "ready" once every thread is in place;
 * "s" prints "eintr read=N cond=N sleep=N epoll=N recv=N sigwait=N";
 * "b" starts a busy thread "late" (late_a -> late_b) and prints "late on";
 * "e" makes it return, joins it and prints "late off";
 * "d" prints "evloop eintr=N";
 * "r" prints "rt N", the number of SIGRTMIN+1 signals handled (every thread
 * takes them, with SA_RESTART; real-time signals queue, so none may be lost);; "q" exits.
 *
 * Build: gcc -O0 -g -fno-omit-frame-pointer -pthread blocked.c -o blocked
 *    or: gcc -O2 -g -fomit-frame-pointer -pthread blocked.c -o blocked
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
/* Keep a call from becoming a tail call, so every function keeps its frame. */
#define KEEP() __asm__ volatile("" ::: "memory")

static atomic_int eintr_read, eintr_cond, eintr_sleep, eintr_epoll, eintr_recv, eintr_sigwait, eintr_evloop, started;
static int pipefd[2];
static atomic_long rt_count;
static void on_rt(int sig) { (void)sig; atomic_fetch_add(&rt_count, 1); }
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int never;
volatile unsigned long spin_counter;

NOINLINE static void reader_c(void) {
	char b;
	atomic_fetch_add(&started, 1);
	for (;;) {
		ssize_t n = read(pipefd[0], &b, 1);
		if (n < 0 && errno == EINTR) atomic_fetch_add(&eintr_read, 1);
		else if (n == 0) break;
	}
	KEEP();
}
NOINLINE static void reader_b(void) { reader_c(); KEEP(); }
NOINLINE static void reader_a(void) { reader_b(); KEEP(); }

NOINLINE static void cond_c(void) {
	pthread_mutex_lock(&mu);
	atomic_fetch_add(&started, 1);
	while (!never) {
		int rc = pthread_cond_wait(&cv, &mu);
		if (rc == EINTR) atomic_fetch_add(&eintr_cond, 1);
	}
	pthread_mutex_unlock(&mu);
	KEEP();
}
NOINLINE static void cond_b(void) { cond_c(); KEEP(); }
NOINLINE static void cond_a(void) { cond_b(); KEEP(); }

NOINLINE static void sleep_c(void) {
	atomic_fetch_add(&started, 1);
	for (;;) {
		struct timespec ts = {1000, 0};
		if (nanosleep(&ts, &ts) < 0 && errno == EINTR) atomic_fetch_add(&eintr_sleep, 1);
	}
	KEEP();
}
NOINLINE static void sleep_b(void) { sleep_c(); KEEP(); }
NOINLINE static void sleep_a(void) { sleep_b(); KEEP(); }

NOINLINE static void epoll_c(void) {
	int ep = epoll_create1(0);
	struct epoll_event ev;
	atomic_fetch_add(&started, 1);
	for (;;) {
		int n = epoll_wait(ep, &ev, 1, -1);
		if (n < 0 && errno == EINTR) atomic_fetch_add(&eintr_epoll, 1);
	}
	KEEP();
}
NOINLINE static void epoll_b(void) { epoll_c(); KEEP(); }
NOINLINE static void epoll_a(void) { epoll_b(); KEEP(); }

NOINLINE static void recv_c(void) {
	int sv[2];
	char b;
	struct timeval tv = {1000, 0};
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) { perror("socketpair"); exit(1); }
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	atomic_fetch_add(&started, 1);
	for (;;) {
		ssize_t n = recv(sv[0], &b, 1, 0);
		if (n < 0 && errno == EINTR) atomic_fetch_add(&eintr_recv, 1);
	}
	KEEP();
}
NOINLINE static void recv_b(void) { recv_c(); KEEP(); }
NOINLINE static void recv_a(void) { recv_b(); KEEP(); }

NOINLINE static void sigw_c(void) {
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	atomic_fetch_add(&started, 1);
	for (;;) {
		struct timespec ts = {1000, 0};
		if (sigtimedwait(&set, NULL, &ts) < 0 && errno == EINTR) atomic_fetch_add(&eintr_sigwait, 1);
	}
	KEEP();
}
NOINLINE static void sigw_b(void) { sigw_c(); KEEP(); }
NOINLINE static void sigw_a(void) { sigw_b(); KEEP(); }

volatile unsigned long jit_sink;
NOINLINE static void jit_leaf(void) { for (int i = 0; i < 20000; i++) jit_sink += i; KEEP(); }
NOINLINE static void jit_work(void) { jit_leaf(); KEEP(); }
NOINLINE static void jit_b(void) {
	unsigned seed = 12345;
	atomic_fetch_add(&started, 1);
	for (;;) {
		struct timespec ts = {0, (long)(rand_r(&seed) % 500) * 1000};
		nanosleep(&ts, NULL);
		jit_work();
	}
	KEEP();
}
NOINLINE static void jit_a(void) { jit_b(); KEEP(); }

NOINLINE static void spin_c(void) {
	atomic_fetch_add(&started, 1);
	for (;;) spin_counter++;
}
NOINLINE static void spin_b(void) { spin_c(); KEEP(); }
NOINLINE static void spin_a(void) { spin_b(); KEEP(); }

/* Four busy threads, each in functions of its own. */
#define BUSY(k)                                                              \
	NOINLINE static void busy##k##_b(void) {                             \
		atomic_fetch_add(&started, 1);                               \
		for (;;) spin_counter += 3 + k;                              \
	}                                                                    \
	NOINLINE static void busy##k##_a(void) { busy##k##_b(); KEEP(); }
BUSY(0)
BUSY(1)
BUSY(2)
BUSY(3)

/* The "late" thread: started and ended on command. */
static atomic_int late_stop, late_started;
static pthread_t late_t;
NOINLINE static void late_b(void) {
	atomic_store(&late_started, 1);
	while (!atomic_load(&late_stop)) spin_counter += 11;
}
NOINLINE static void late_a(void) { late_b(); KEEP(); }
static void *late_start(void *arg) {
	late_a();
	return arg;
}

static void *start(void *arg) {
	void (*fn)(void) = (void (*)(void))arg;
	fn();
	return NULL;
}

static void *evloop(void *arg) {
	int ep = epoll_create1(0);
	struct epoll_event ev;
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;) {
		int n = epoll_wait(ep, &ev, 1, -1);
		if (n < 0 && errno == EINTR) atomic_fetch_add(&eintr_evloop, 1);
	}
	return NULL;
}

static void spawn(const char *name, void (*fn)(void)) {
	pthread_t t;
	if (pthread_create(&t, NULL, start, (void *)fn) != 0) { perror("pthread_create"); exit(1); }
	pthread_setname_np(t, name);
}

NOINLINE static void main_wait(void) {
	char line[64];
	for (;;) {
		ssize_t n = read(0, line, sizeof line - 1);
		if (n < 0 && errno == EINTR) { atomic_fetch_add(&eintr_read, 1); continue; }
		if (n <= 0) exit(0);
		line[n] = 0;
		if (line[0] == 'q') exit(0);
		if (line[0] == 'b') {
			atomic_store(&late_stop, 0);
			atomic_store(&late_started, 0);
			if (pthread_create(&late_t, NULL, late_start, NULL) != 0) { perror("pthread_create"); exit(1); }
			pthread_setname_np(late_t, "late");
			while (!atomic_load(&late_started)) usleep(1000);
			printf("late on\n");
			fflush(stdout);
		}
		if (line[0] == 'e') {
			atomic_store(&late_stop, 1);
			pthread_join(late_t, NULL);
			printf("late off\n");
			fflush(stdout);
		}
		if (line[0] == 'd') {
			printf("evloop eintr=%d\n", atomic_load(&eintr_evloop));
			fflush(stdout);
		}
		if (line[0] == 'r') {
			printf("rt %ld\n", atomic_load(&rt_count));
			fflush(stdout);
		}
		if (line[0] == 's') {
			printf("eintr read=%d cond=%d sleep=%d epoll=%d recv=%d sigwait=%d\n", eintr_read, eintr_cond,
			       eintr_sleep, eintr_epoll, eintr_recv, eintr_sigwait);
			fflush(stdout);
		}
	}
	KEEP();
}

int main(int argc, char **argv) {
	int want = 6;
	sigset_t set;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_rt;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	/* SIGUSR2 stays blocked in every thread: sigtimedwait takes it. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pipe(pipefd) != 0) { perror("pipe"); return 1; }
	spawn("reader", reader_a);
	spawn("condwait", cond_a);
	spawn("sleeper", sleep_a);
	spawn("epoller", epoll_a);
	spawn("recver", recv_a);
	spawn("sigwaiter", sigw_a);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "spin") == 0) { spawn("spinner", spin_a); want++; }
		if (strcmp(argv[i], "jitter") == 0) { spawn("jitter", jit_a); want++; }
		if (strcmp(argv[i], "evloop") == 0) {
			pthread_t t;
			if (pthread_create(&t, NULL, evloop, NULL) != 0) { perror("pthread_create"); exit(1); }
			pthread_setname_np(t, "evloop");
			want++;
		}
		if (strcmp(argv[i], "busy") == 0) {
			spawn("busy-0", busy0_a);
			spawn("busy-1", busy1_a);
			spawn("busy-2", busy2_a);
			spawn("busy-3", busy3_a);
			want += 4;
		}
	}
	while (atomic_load(&started) < want) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	main_wait();
	return 0;
}
