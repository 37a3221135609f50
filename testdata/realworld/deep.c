/* Real-world test target: recursion argv[1] deep (rec -> rec -> ...), then
 * blocked in read(2) on stdin after printing "ready".
 * Build: gcc -O0 -g deep.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define NOINLINE __attribute__((noinline))
NOINLINE int rec(int n) {
	if (n == 0) {
		char b;
		printf("ready\n");
		fflush(stdout);
		return (int)read(0, &b, 1);
	}
	return rec(n - 1) + 1;
}
int main(int argc, char **argv) { return rec(argc > 1 ? atoi(argv[1]) : 10); }
