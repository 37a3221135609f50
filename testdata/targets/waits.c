/* waits: threads blocked on file descriptors, in timed waits, in sleep
 * loops and spinning, for what-a-thread-waits-on and progress diagnosis.
 *
 * argv[1] is the scenario:
 *   fds         "piper" reads an empty pipe; "acceptor" waits in accept(2)
 *               on a listening TCP socket of 127.0.0.1; "client" waits in
 *               recv(2) on a TCP connection to a server socket main holds;
 *               "looper" waits in epoll_wait(2) on a pipe, an eventfd, a
 *               timerfd and the listening socket; "poller" in poll(2) on
 *               the pipe and the eventfd; "selector" in select(2) on the
 *               pipe
 *   timedwait MS  "ticker" waits on a condition variable with a timeout
 *               of MS milliseconds, again and again
 *   sleeploop   "taker-0..1" lock a mutex, sleep 1 ms, unlock, forever
 *   spin        "spinner" spins in a loop that makes no call
 *   idle N      "idle-0..N-1" wait on condition variables nobody signals
 *   readers N   "reader-0..N-1" read one empty pipe
 *   holder      "holder" locks a mutex, then reads an empty pipe;
 *               "waiter-0..1" wait for the mutex
 * Main prints "ready" and NAME=VALUE pairs (thread ids, descriptors,
 * ports as the program itself sees them) once every thread is about to
 * block, then reads stdin until EOF.
 *
 * Build: gcc -O2 -g -pthread waits.c -o waits
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAXT 600

static atomic_int started;
static int tids[MAXT];
static const char *names[MAXT];
static int nthreads;

static int pipefd[2], lfd, cfd, sfd, epfd, evfd, tfd, pollpipe[2];
static int tick_ms;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cmu[MAXT];
static pthread_cond_t cv[MAXT];
static volatile unsigned long spins;

struct arg {
	int i;
	void (*fn)(int);
};

static void *trampoline(void *p) {
	struct arg *a = p;
	pthread_setname_np(pthread_self(), names[a->i]);
	tids[a->i] = (int)syscall(SYS_gettid);
	atomic_fetch_add(&started, 1);
	a->fn(a->i);
	return NULL;
}

static void spawn(const char *name, void (*fn)(int)) {
	static struct arg args[MAXT];
	pthread_t t;
	args[nthreads] = (struct arg){nthreads, fn};
	names[nthreads] = name;
	nthreads++;
	if (pthread_create(&t, NULL, trampoline, &args[nthreads - 1])) abort();
}

static NOINLINE void piper(int i) {
	char c;
	(void)i;
	read(pipefd[0], &c, 1);
}

static NOINLINE void acceptor(int i) {
	(void)i;
	accept(lfd, NULL, NULL);
}

static NOINLINE void client(int i) {
	char c;
	(void)i;
	recv(cfd, &c, 1, 0);
}

static NOINLINE void looper(int i) {
	struct epoll_event ev[4];
	(void)i;
	epoll_wait(epfd, ev, 4, -1);
}

static NOINLINE void poller(int i) {
	struct pollfd p[3] = {{pollpipe[0], POLLIN, 0}, {-1, 0, 0}, {evfd, POLLIN, 0}};
	(void)i;
	poll(p, 3, -1);
}

static NOINLINE void selector(int i) {
	fd_set r;
	(void)i;
	FD_ZERO(&r);
	FD_SET(pollpipe[0], &r);
	select(pollpipe[0] + 1, &r, NULL, NULL, NULL);
}

static NOINLINE void ticker(int i) {
	pthread_mutex_lock(&cmu[i]);
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)tick_ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&cv[i], &cmu[i], &ts);
	}
}

static NOINLINE void taker(int i) {
	(void)i;
	for (;;) {
		pthread_mutex_lock(&mu);
		usleep(1000);
		pthread_mutex_unlock(&mu);
	}
}

static atomic_int held;

static NOINLINE void holder(int i) {
	char c;
	(void)i;
	pthread_mutex_lock(&mu);
	atomic_store(&held, 1);
	read(pipefd[0], &c, 1);
}

static NOINLINE void waiter(int i) {
	(void)i;
	pthread_mutex_lock(&mu);
}

static NOINLINE void spin_here(void) {
	for (;;) spins++;
}

static NOINLINE void spinner(int i) {
	(void)i;
	spin_here();
}

static NOINLINE void idle_worker(int i) {
	pthread_mutex_lock(&cmu[i]);
	for (;;) pthread_cond_wait(&cv[i], &cmu[i]);
}

static int port_of(int fd, int peer) {
	struct sockaddr_in a;
	socklen_t n = sizeof a;
	if ((peer ? getpeername(fd, (struct sockaddr *)&a, &n) : getsockname(fd, (struct sockaddr *)&a, &n)) != 0) abort();
	return ntohs(a.sin_port);
}

static int listener(void) {
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4)) abort();
	return fd;
}

static void setup_fds(void) {
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int server = listener();
	if (pipe(pipefd) || pipe(pollpipe)) abort();
	lfd = listener();
	a.sin_port = htons(port_of(server, 0));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof a)) abort();
	sfd = accept(server, NULL, NULL);
	close(server);
	evfd = eventfd(0, 0);
	tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	epfd = epoll_create1(0);
	int watch[] = {pipefd[0], evfd, tfd, lfd};
	for (int i = 0; i < 4; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = watch[i]};
		if (evfd < 0 || tfd < 0 || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, watch[i], &ev)) abort();
	}
	spawn("piper", piper);
	spawn("acceptor", acceptor);
	spawn("client", client);
	spawn("looper", looper);
	spawn("poller", poller);
	spawn("selector", selector);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "fds";
	for (int i = 0; i < MAXT; i++) {
		pthread_mutex_init(&cmu[i], NULL);
		pthread_cond_init(&cv[i], NULL);
	}
	if (!strcmp(mode, "fds")) {
		setup_fds();
	} else if (!strcmp(mode, "timedwait")) {
		tick_ms = argc > 2 ? atoi(argv[2]) : 100;
		spawn("ticker", ticker);
	} else if (!strcmp(mode, "sleeploop")) {
		spawn("taker-0", taker);
		spawn("taker-1", taker);
	} else if (!strcmp(mode, "spin")) {
		spawn("spinner", spinner);
	} else if (!strcmp(mode, "readers")) {
		static char nm[MAXT][16];
		int n = argc > 2 ? atoi(argv[2]) : 4;
		if (pipe(pipefd)) abort();
		for (int i = 0; i < n && i < MAXT; i++) {
			snprintf(nm[i], sizeof nm[i], "reader-%d", i);
			spawn(nm[i], piper);
		}
	} else if (!strcmp(mode, "holder")) {
		if (pipe(pipefd)) abort();
		spawn("holder", holder);
		while (!atomic_load(&held)) usleep(1000);
		spawn("waiter-0", waiter);
		spawn("waiter-1", waiter);
	} else if (!strcmp(mode, "idle")) {
		static char nm[MAXT][16];
		int n = argc > 2 ? atoi(argv[2]) : 4;
		for (int i = 0; i < n && i < MAXT; i++) {
			snprintf(nm[i], sizeof nm[i], "idle-%d", i);
			spawn(nm[i], idle_worker);
		}
	} else {
		fprintf(stderr, "unknown scenario %s\n", mode);
		return 2;
	}
	while (atomic_load(&started) < nthreads) usleep(1000);
	printf("ready");
	for (int i = 0; i < nthreads; i++) printf(" %s=%d", names[i], tids[i]);
	if (!strcmp(mode, "holder")) printf(" pipefd=%d mutex=%p", pipefd[0], (void *)&mu);
	if (!strcmp(mode, "fds"))
		printf(" pipefd=%d lfd=%d lport=%d cfd=%d cport=%d sport=%d epfd=%d evfd=%d tfd=%d pollfd=%d",
		       pipefd[0], lfd, port_of(lfd, 0), cfd, port_of(cfd, 0), port_of(cfd, 1), epfd, evfd, tfd, pollpipe[0]);
	printf("\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
	return 0;
}
