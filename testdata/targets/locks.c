/* locks: threads blocked on locks, for lock-owner and deadlock diagnosis.
 *
 * argv[1] is the scenario:
 *   deadlock KIND   threads "locker-a" and "locker-b" deadlock on two mutexes
 *                   of KIND (normal, errorcheck, recursive, adaptive, pi,
 *                   robust)
 *   cycle3          "ring-0" -> "ring-1" -> "ring-2" -> "ring-0" (normal)
 *   self            "selfish" locks a normal mutex twice
 *   rwlock          "writer" holds a rwlock for writing (parked in read(2)
 *                   on stdin's twin pipe); "reader-0..2" wait to read it
 *   condsem         "cwait-0..1" wait on a condition variable, "swait-0..1"
 *                   on a semaphore; nobody holds anything
 *   exited          "holder" locks a mutex and exits; "orphan" waits for it
 *   garbage         "orphan" waits for a mutex held by "holder"; then main
 *                   overwrites the mutex's __kind and __owner with junk
 *   unmapped        "orphan" waits for a mutex in a page that main then
 *                   unmaps ("holder" owned it)
 *   flip            "orphan" waits for a mutex held by "holder" while
 *                   "flipper" keeps rewriting its __owner field
 *   rawint          "rawint" waits in a raw futex on a plain int
 * When every thread is where the scenario wants it (each set a flag just
 * before its last blocking call, and /proc shows it blocked in futex(2)),
 * main prints "ready" and NAME=TID / NAME=ADDRESS pairs, then waits for
 * EOF on stdin.
 *
 * Build: gcc -O2 -g -pthread locks.c -o locks
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")
#define MAXT 8

static pthread_mutex_t mx[3];
static pthread_mutex_t *mp; /* the mutex of the single-waiter scenarios */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t cvmu = PTHREAD_MUTEX_INITIALIZER;
static sem_t sem, order[3];
static int rawword;
static volatile int never;

static atomic_int blocking[MAXT];
static int tids[MAXT];
static const char *names[MAXT];
static int nthreads;

struct arg {
	int i;
	void (*fn)(int);
};

static void *start(void *p) {
	struct arg *a = p;
	tids[a->i] = gettid();
	pthread_setname_np(pthread_self(), names[a->i]);
	a->fn(a->i);
	return NULL;
}

static void spawn(const char *name, void (*fn)(int)) {
	struct arg *a = malloc(sizeof *a);
	a->i = nthreads;
	a->fn = fn;
	names[nthreads++] = name;
	pthread_t t;
	if (pthread_create(&t, NULL, start, a) != 0) {
		perror("pthread_create");
		exit(1);
	}
}

static void about_to_block(int i) { atomic_store(&blocking[i], 1); }

/* Deadlock of two: a holds m0 and wants m1, b holds m1 and wants m0. The
 * semaphores order the first locks before the second ones. */
NOINLINE static void lock_second(pthread_mutex_t *m, int i) {
	about_to_block(i);
	pthread_mutex_lock(m);
	KEEP();
}
static void locker_a(int i) {
	pthread_mutex_lock(&mx[0]);
	sem_post(&order[0]);
	sem_wait(&order[1]);
	lock_second(&mx[1], i);
}
static int blocked_in_futex(int tid);
static void locker_b(int i) {
	sem_wait(&order[0]);
	pthread_mutex_lock(&mx[1]);
	sem_post(&order[1]);
	/* a blocks first: with PI mutexes the kernel then refuses b alone
	 * (EDEADLK); two lock calls at the same time can both be refused. */
	while (!atomic_load(&blocking[0]) || !blocked_in_futex(tids[0])) usleep(200);
	usleep(2000);
	lock_second(&mx[0], i);
}

/* Ring of three: ring-i holds mx[i], then wants mx[(i+1)%3]. */
static void ring(int i) {
	pthread_mutex_lock(&mx[i]);
	sem_post(&order[i]);
	for (int j = 0; j < 3; j++) {
		if (j != i) {
			sem_wait(&order[j]);
			sem_post(&order[j]);
		}
	}
	lock_second(&mx[(i + 1) % 3], i);
}

static void selfish(int i) {
	pthread_mutex_lock(&mx[0]);
	lock_second(&mx[0], i);
}

NOINLINE static void hold_for_writing(int i) {
	pthread_rwlock_wrlock(&rw);
	sem_post(&order[0]);
	about_to_block(i);
	sem_wait(&sem); /* never posted */
	KEEP();
}
NOINLINE static void want_to_read(int i) {
	sem_wait(&order[0]);
	sem_post(&order[0]);
	about_to_block(i);
	pthread_rwlock_rdlock(&rw);
	KEEP();
}

NOINLINE static void cond_waiter(int i) {
	pthread_mutex_lock(&cvmu);
	about_to_block(i);
	while (!never) pthread_cond_wait(&cv, &cvmu);
	pthread_mutex_unlock(&cvmu);
	KEEP();
}
NOINLINE static void sem_waiter(int i) {
	about_to_block(i);
	sem_wait(&sem);
	KEEP();
}

static void holder_exits(int i) {
	pthread_mutex_lock(mp);
	about_to_block(i);
}
static void holder_stays(int i) {
	pthread_mutex_lock(mp);
	sem_post(&order[0]);
	about_to_block(i);
	sem_wait(&sem);
}
static void orphan(int i) {
	sem_wait(&order[0]);
	lock_second(mp, i);
}
static void flipper(int i) {
	int real = tids[0], junk = 0x3ffffff0;
	(void)i;
	atomic_store(&blocking[i], 1);
	for (unsigned long n = 0;; n++) {
		mp->__data.__owner = (n & 1) ? junk : real;
		KEEP();
	}
}
NOINLINE static void raw_waiter(int i) {
	about_to_block(i);
	syscall(SYS_futex, &rawword, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	KEEP();
}

/* blocked_in_futex reports whether thread tid is blocked in futex(2). */
static int blocked_in_futex(int tid) {
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f) return 0;
	int ok = fgets(buf, sizeof buf, f) && atoi(buf) == SYS_futex;
	fclose(f);
	return ok;
}

static void wait_blocked(int from, int to, int must_futex) {
	for (int i = from; i < to; i++) {
		while (!atomic_load(&blocking[i]) || tids[i] == 0) usleep(200);
		if (must_futex)
			while (!blocked_in_futex(tids[i])) usleep(200);
	}
}

static void init_mutexes(const char *kind) {
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	if (!strcmp(kind, "errorcheck")) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	else if (!strcmp(kind, "recursive")) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	else if (!strcmp(kind, "adaptive")) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	else if (!strcmp(kind, "pi")) pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	else if (!strcmp(kind, "robust")) pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	else if (strcmp(kind, "normal")) {
		fprintf(stderr, "unknown mutex kind %s\n", kind);
		exit(2);
	}
	for (int i = 0; i < 3; i++) pthread_mutex_init(&mx[i], &a);
}

static void print_ready(void) {
	printf("ready");
	for (int i = 0; i < nthreads; i++) printf(" %s=%d", names[i], tids[i]);
	printf(" mx0=%p mx1=%p mx2=%p mp=%p rw=%p cv=%p sem=%p rawword=%p\n", (void *)&mx[0], (void *)&mx[1],
	       (void *)&mx[2], (void *)mp, (void *)&rw, (void *)&cv, (void *)&sem, (void *)&rawword);
	fflush(stdout);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "deadlock";
	sem_init(&sem, 0, 0);
	for (int i = 0; i < 3; i++) sem_init(&order[i], 0, 0);
	mp = &mx[0];
	if (!strcmp(mode, "deadlock")) {
		init_mutexes(argc > 2 ? argv[2] : "normal");
		spawn("locker-a", locker_a);
		spawn("locker-b", locker_b);
		wait_blocked(0, 2, 1);
	} else if (!strcmp(mode, "cycle3")) {
		init_mutexes("normal");
		spawn("ring-0", ring);
		spawn("ring-1", ring);
		spawn("ring-2", ring);
		wait_blocked(0, 3, 1);
	} else if (!strcmp(mode, "self")) {
		init_mutexes("normal");
		spawn("selfish", selfish);
		wait_blocked(0, 1, 1);
	} else if (!strcmp(mode, "rwlock")) {
		spawn("writer", hold_for_writing);
		spawn("reader-0", want_to_read);
		spawn("reader-1", want_to_read);
		spawn("reader-2", want_to_read);
		wait_blocked(0, 4, 1);
	} else if (!strcmp(mode, "condsem")) {
		spawn("cwait-0", cond_waiter);
		spawn("cwait-1", cond_waiter);
		spawn("swait-0", sem_waiter);
		spawn("swait-1", sem_waiter);
		wait_blocked(0, 4, 1);
	} else if (!strcmp(mode, "exited") || !strcmp(mode, "garbage") || !strcmp(mode, "unmapped") ||
		   !strcmp(mode, "flip")) {
		if (!strcmp(mode, "unmapped")) {
			mp = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (mp == MAP_FAILED) return 1;
		}
		pthread_mutex_init(mp, NULL);
		if (!strcmp(mode, "exited")) {
			spawn("holder", holder_exits);
			wait_blocked(0, 1, 0);
			while (syscall(SYS_tgkill, getpid(), tids[0], 0) == 0) usleep(200);
			sem_post(&order[0]);
		} else {
			spawn("holder", holder_stays);
		}
		spawn("orphan", orphan);
		wait_blocked(0, 2, 0);
		wait_blocked(1, 2, 1);
		if (!strcmp(mode, "garbage")) {
			mp->__data.__kind = 0x7777;
			mp->__data.__owner = 0x3ffffff0;
		} else if (!strcmp(mode, "unmapped")) {
			munmap(mp, 4096);
		} else if (!strcmp(mode, "flip")) {
			spawn("flipper", flipper);
			wait_blocked(2, 3, 0);
		}
	} else if (!strcmp(mode, "rawint")) {
		spawn("rawint", raw_waiter);
		wait_blocked(0, 1, 1);
	} else {
		fprintf(stderr, "unknown scenario %s\n", mode);
		return 2;
	}
	print_ready();
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
	return 0;
}
