/* A small target for the pprof mapping test: profile_pprof_test.go builds
 * it with gcc at test time, reads its symbols with nm and its build id with
 * readelf, and hands go tool pprof frames without names so that pprof has to
 * find hot_a, hot_b and main itself from our mapping's Start/Limit/Offset. */
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) void hot_a(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 3;
}

__attribute__((noinline)) void hot_b(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink ^= i + 7;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	hot_a(3 * n);
	hot_b(n);
	return 0;
}
