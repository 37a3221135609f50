/* jit: calls through a tiny piece of machine code written at run time into
 * an anonymous executable mapping, named in /tmp/perf-PID.map as
 * "jit_trampoline" (the format perf and JIT runtimes use). The chain is
 * main -> run_jit -> jit_trampoline -> jit_blocker -> read(stdin).
 * Prints "ready"; exits on EOF. Removes the map file on exit.
 *
 * Build: gcc -O2 -g jit.c -o jit
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static char mapfile[64];

NOINLINE static void jit_blocker(void) {
	char line[64];
	printf("ready\n");
	fflush(stdout);
	while (read(0, line, sizeof line) > 0) {}
	unlink(mapfile);
	exit(0);
}

NOINLINE static void run_jit(void (*code)(void (*)(void))) { code(jit_blocker); KEEP(); }

int main(void) {
	/* push rbp; mov rbp,rsp; call rdi; pop rbp; ret */
	static const unsigned char tramp[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
	unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) { perror("mmap"); return 1; }
	memset(mem, 0xcc, 4096);
	memcpy(mem + 64, tramp, sizeof tramp);
	snprintf(mapfile, sizeof mapfile, "/tmp/perf-%d.map", getpid());
	FILE *f = fopen(mapfile, "w");
	if (!f) { perror(mapfile); return 1; }
	fprintf(f, "%lx %zx jit_trampoline\n", (unsigned long)(mem + 64), sizeof tramp);
	fclose(f);
	run_jit((void (*)(void (*)(void)))(mem + 64));
	return 0;
}
