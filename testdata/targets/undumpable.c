/* undumpable: a process that made itself not dumpable, as a daemon that
 * dropped root or a program that holds secrets does:
 * prctl(PR_SET_DUMPABLE, 0). It prints "ready" and blocks reading stdin
 * (main -> wait_here -> read) until "q" or EOF.
 *
 * Build: gcc -O0 -g undumpable.c -o undumpable
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

__attribute__((noinline)) static void wait_here(void) {
	char c;
	while (read(0, &c, 1) == 1 && c != 'q') {
	}
}

int main(void) {
	if (prctl(PR_SET_DUMPABLE, 0) != 0) {
		perror("prctl");
		return 1;
	}
	printf("ready dumpable=%d\n", prctl(PR_GET_DUMPABLE));
	fflush(stdout);
	wait_here();
	return 0;
}
