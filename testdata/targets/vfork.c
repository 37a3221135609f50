/* vfork: the parent blocks in vfork (uninterruptible for ptrace: it cannot
 * reach a ptrace stop) while the child sleeps for argv[1] milliseconds;
 * the child prints "ready" first. The parent chain is main -> vf_a -> vf_b
 * -> vfork. Afterwards the parent prints "back" and waits for "q".
 *
 * Build: gcc -O0 -g -fno-omit-frame-pointer vfork.c -o vfork
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static long ms = 2000;

NOINLINE static void vf_b(void) {
	pid_t p = vfork();
	if (p == 0) {
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		write(1, "ready\n", 6);
		nanosleep(&ts, NULL);
		_exit(0);
	}
	KEEP();
}
NOINLINE static void vf_a(void) { vf_b(); KEEP(); }

int main(int argc, char **argv) {
	if (argc > 1) ms = atol(argv[1]);
	vf_a();
	printf("back\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'q') break;
	}
	return 0;
}
