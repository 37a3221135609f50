/* inlined: the main thread blocks in read(2) called from a function
 * inlined into main, so a dump has an inlined frame at a live pc.
 * Prints "ready"; exits on EOF on stdin.
 *
 * Build: gcc -O2 -g inlined.c -o inlined
 */
#include <stdio.h>
#include <unistd.h>

volatile int sink;

static inline __attribute__((always_inline)) long wait_for_input(char *buf, int n) {
	sink = n;
	long r = read(0, buf, (size_t)n);
	sink = (int)r;
	return r;
}

int main(void) {
	char buf[64];
	printf("ready\n");
	fflush(stdout);
	while (wait_for_input(buf, sizeof buf) > 0) {
	}
	return 0;
}
