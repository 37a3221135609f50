/* edges: threads that wait on things other than a plain mutex, for the
 * wait-for graph's other edges.
 *
 * argv[1] is the scenario:
 *   join      main locks "pool_lock" and joins "joined", which waits for
 *             pool_lock: a cycle through pthread_join
 *   stdio     "holder" holds flockfile(stdout) and waits for "gate" (a
 *             mutex main holds); "printer" blocks in printf
 *   stdiocycle "holder" holds flockfile(stdout) and waits for "gate",
 *             held by "printer", which blocks in printf: a cycle
 *   pshared   a child process ("lockowner") locks a process-shared mutex
 *             in a shared mapping; "waiter" here waits for it
 *   chain     "a" waits for lock_a held by "b", which waits on a condition
 *             variable: a chain, not a cycle
 *   accounts  "debit" holds accounts[1].lock; "credit" waits for it
 *   reuse     "holder" takes flockfile(stdout) and exits holding it; a new
 *             thread "reuser" is given its TID (ns_last_pid, root only;
 *             "ready noreuse" otherwise); "printer" blocks in printf:
 *             the owner recorded is gone, its TID another thread's
 *   mutexreuse "holder" locks the plain mutex "stale" and exits holding
 *             it; "reuser" is given its TID (as in reuse) and then waits
 *             for stale, as does "orphan": glibc records the holder's
 *             TID, now the reuser's, which never locked it
 * When every thread is where the scenario wants it, main prints "ready"
 * and NAME=TID / NAME=ADDRESS pairs (the program's own view of who took
 * what), then waits for EOF on stdin (the join scenario's main is blocked
 * for ever; it prints before joining).
 *
 * Build: gcc -O2 -g -pthread edges.c -o edges
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cvmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

struct account {
	long balance[7];
	pthread_mutex_t lock;
};
struct account accounts[4];

static atomic_int tids[4];
static atomic_int step;
static volatile int never;

static int blocked_in_futex(int tid) {
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f) return 0;
	int ok = fgets(buf, sizeof buf, f) && atoi(buf) == SYS_futex;
	fclose(f);
	return ok;
}

static void wait_futex(int i) {
	while (!atomic_load(&tids[i])) usleep(200);
	while (!blocked_in_futex(atomic_load(&tids[i]))) usleep(200);
}

static void name(int i, const char *n) {
	pthread_setname_np(pthread_self(), n);
	atomic_store(&tids[i], gettid());
}

NOINLINE static void *joined(void *p) {
	(void)p;
	name(0, "joined");
	while (atomic_load(&step) < 1) usleep(200);
	pthread_mutex_lock(&pool_lock);
	KEEP();
	return NULL;
}

NOINLINE static void *holder(void *p) {
	(void)p;
	flockfile(stdout);
	name(0, "holder");
	pthread_mutex_lock(&gate);
	KEEP();
	return NULL;
}

NOINLINE static void *printer(void *p) {
	int cycle = p != NULL;
	name(1, "printer");
	if (cycle) pthread_mutex_lock(&gate);
	atomic_store(&step, 1);
	while (atomic_load(&step) < 2) usleep(200);
	printf("printer %d\n", gettid());
	KEEP();
	return NULL;
}

NOINLINE static void *waiter(void *p) {
	name(0, "waiter");
	pthread_mutex_lock((pthread_mutex_t *)p);
	KEEP();
	return NULL;
}

NOINLINE static void *chain_a(void *p) {
	(void)p;
	name(0, "a");
	while (atomic_load(&step) < 1) usleep(200);
	pthread_mutex_lock(&lock_a);
	KEEP();
	return NULL;
}

NOINLINE static void *chain_b(void *p) {
	(void)p;
	pthread_mutex_lock(&lock_a);
	name(1, "b");
	atomic_store(&step, 1);
	pthread_mutex_lock(&cvmu);
	while (!never) pthread_cond_wait(&cv, &cvmu);
	KEEP();
	return NULL;
}

NOINLINE static void *debit(void *p) {
	(void)p;
	pthread_mutex_lock(&accounts[1].lock);
	name(0, "debit");
	pthread_mutex_lock(&cvmu);
	while (!never) pthread_cond_wait(&cv, &cvmu);
	return NULL;
}

NOINLINE static void *credit(void *p) {
	(void)p;
	while (atomic_load(&tids[0]) == 0) usleep(200);
	name(1, "credit");
	pthread_mutex_lock(&accounts[1].lock);
	KEEP();
	return NULL;
}

static pthread_t spawn(void *(*fn)(void *), void *arg) {
	pthread_t t;
	if (pthread_create(&t, NULL, fn, arg) != 0) {
		perror("pthread_create");
		exit(1);
	}
	return t;
}

static void wait_stdin(void) {
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
}

/* The stdio scenarios write "ready" with write(2): stdout is locked. */
static void stdio(int cycle) {
	if (!cycle) pthread_mutex_lock(&gate);
	spawn(printer, cycle ? (void *)1 : NULL);
	while (atomic_load(&step) < 1) usleep(200);
	spawn(holder, NULL);
	wait_futex(0);
	atomic_store(&step, 2);
	wait_futex(1);
	char buf[256];
	int n = snprintf(buf, sizeof buf, "ready holder=%d printer=%d gate=%p stdout=%p\n", tids[0], tids[1],
			 (void *)&gate, (void *)stdout);
	if (write(1, buf, n) != n) exit(1);
	wait_stdin();
}

static void nothing(int sig) { (void)sig; }

static void *exit_holding(void *p) {
	(void)p;
	flockfile(stdout);
	name(0, "holder");
	return NULL;
}

static void *reuser(void *p) {
	name(2, "reuser");
	while (!*(volatile int *)p) pause();
	return NULL;
}

/* reuse: the stdio lock's owner has exited and its TID is another
 * thread's now (given by ns_last_pid, with a stack of another size so
 * that glibc gives it another struct pthread). */
static void reuse(void) {
	/* Stacks of their own sizes: no later thread gets the holder's
	 * struct pthread from glibc's cache of stacks (a thread that did
	 * would be the lock's owner for glibc too: it could take it again). */
	pthread_attr_t ha;
	pthread_attr_init(&ha);
	pthread_attr_setstacksize(&ha, 1 << 17);
	pthread_t t;
	if (pthread_create(&t, &ha, exit_holding, NULL) != 0) exit(1);
	pthread_join(t, NULL);
	int old = tids[0], got = 0;
	static int stop;
	for (int try = 0; try < 200 && got != old; try++) {
		FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
		if (!f) break;
		fprintf(f, "%d", old - 1);
		if (fclose(f) != 0) break;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 1 << 20);
		atomic_store(&tids[2], 0);
		if (pthread_create(&t, &a, reuser, &stop) != 0) exit(1);
		while (!(got = atomic_load(&tids[2]))) usleep(100);
		if (got != old) {
			stop = 1;
			pthread_kill(t, SIGUSR1);
			pthread_join(t, NULL);
			stop = 0;
		}
	}
	char buf[256];
	int n;
	if (got != old) {
		n = snprintf(buf, sizeof buf, "ready noreuse\n");
	} else {
		spawn(printer, NULL);
		while (atomic_load(&step) < 1) usleep(200);
		atomic_store(&step, 2);
		wait_futex(1);
		n = snprintf(buf, sizeof buf, "ready holder=%d reuser=%d printer=%d\n", old, got, tids[1]);
	}
	if (write(1, buf, n) != n) exit(1);
	wait_stdin();
}

static pthread_mutex_t stale = PTHREAD_MUTEX_INITIALIZER;
static atomic_int decide; /* the reuser's: 1 exit (wrong TID), 2 lock stale */

static void *exit_holding_stale(void *p) {
	(void)p;
	pthread_mutex_lock(&stale);
	name(0, "holder");
	return NULL;
}

static void *stale_reuser(void *p) {
	(void)p;
	name(2, "reuser");
	int d;
	while (!(d = atomic_load(&decide))) usleep(200);
	if (d == 2) pthread_mutex_lock(&stale);
	return NULL;
}

static void *stale_orphan(void *p) {
	(void)p;
	name(1, "orphan");
	pthread_mutex_lock(&stale);
	return NULL;
}

static void mutex_reuse(void) {
	pthread_t t;
	if (pthread_create(&t, NULL, exit_holding_stale, NULL) != 0) exit(1);
	pthread_join(t, NULL);
	int old = tids[0], got = 0;
	for (int try = 0; try < 200 && got != old; try++) {
		FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
		if (!f) break;
		fprintf(f, "%d", old - 1);
		if (fclose(f) != 0) break;
		atomic_store(&tids[2], 0);
		atomic_store(&decide, 0);
		if (pthread_create(&t, NULL, stale_reuser, NULL) != 0) exit(1);
		while (!(got = atomic_load(&tids[2]))) usleep(100);
		if (got != old) {
			atomic_store(&decide, 1);
			pthread_join(t, NULL);
		}
	}
	if (got != old) {
		printf("ready noreuse\n");
	} else {
		atomic_store(&decide, 2);
		wait_futex(2);
		spawn(stale_orphan, NULL);
		wait_futex(1);
		printf("ready holder=%d reuser=%d orphan=%d stale=%p\n", old, got, tids[1], (void *)&stale);
	}
	fflush(stdout);
	wait_stdin();
}

static void pshared(void) {
	pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int *flag = (int *)(m + 1);
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(m, &a);
	pid_t child = fork();
	if (child == 0) {
		prctl(PR_SET_NAME, "lockowner");
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pthread_mutex_lock(m);
		__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
		for (;;) pause();
	}
	while (!__atomic_load_n(flag, __ATOMIC_SEQ_CST)) usleep(200);
	spawn(waiter, m);
	wait_futex(0);
	printf("ready waiter=%d lockowner=%d m=%p\n", tids[0], child, (void *)m);
	fflush(stdout);
	wait_stdin();
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "join";
	if (!strcmp(mode, "join")) {
		pthread_mutex_lock(&pool_lock);
		pthread_t t = spawn(joined, NULL);
		while (!atomic_load(&tids[0])) usleep(200);
		atomic_store(&step, 1);
		wait_futex(0);
		printf("ready main=%d joined=%d pool_lock=%p\n", getpid(), tids[0], (void *)&pool_lock);
		fflush(stdout);
		pthread_join(t, NULL);
	} else if (!strcmp(mode, "stdio")) {
		stdio(0);
	} else if (!strcmp(mode, "stdiocycle")) {
		stdio(1);
	} else if (!strcmp(mode, "reuse")) {
		signal(SIGUSR1, nothing);
		reuse();
	} else if (!strcmp(mode, "mutexreuse")) {
		mutex_reuse();
	} else if (!strcmp(mode, "pshared")) {
		pshared();
	} else if (!strcmp(mode, "chain")) {
		spawn(chain_b, NULL);
		spawn(chain_a, NULL);
		wait_futex(0);
		wait_futex(1);
		printf("ready a=%d b=%d lock_a=%p cv=%p\n", tids[0], tids[1], (void *)&lock_a, (void *)&cv);
		fflush(stdout);
		wait_stdin();
	} else if (!strcmp(mode, "accounts")) {
		spawn(debit, NULL);
		spawn(credit, NULL);
		wait_futex(0);
		wait_futex(1);
		printf("ready debit=%d credit=%d lock=%p accounts=%p\n", tids[0], tids[1], (void *)&accounts[1].lock,
		       (void *)accounts);
		fflush(stdout);
		wait_stdin();
	} else {
		fprintf(stderr, "unknown scenario %s\n", mode);
		return 2;
	}
	return 0;
}
