/* hostile_names: a target whose names attack the operator's terminal.
 *
 * The process (prctl PR_SET_NAME) and a thread (pthread_setname_np) are
 * named "\e[2J\e[31mX" (clear the screen, turn text red). The thread blocks
 * in read() inside hostile_fn, whose symbol the test renames with
 * objcopy --redefine-sym to a name holding escape sequences (C cannot spell
 * such a name; an ELF symbol can). The test also runs the binary from a
 * path with control characters, so the exe path and module name carry them.
 *
 * With argv[1] == "spin", a second thread of the same name spins in
 * hostile_spin (renamed likewise), for on-CPU sampling.
 *
 * Protocol: prints "ready ADDR" (ADDR: hostile_fn's address) once the
 * threads are in place; main then blocks reading stdin.
 *
 * Build: gcc -O0 -fno-omit-frame-pointer -pthread -c hostile_names.c -o h.o
 *        objcopy --redefine-sym hostile_fn=$'evil\e[2J\e]0;owned\afn' \
 *                --redefine-sym hostile_spin=$'spin\e[2Jfn' h.o
 *        gcc -pthread h.o -o hostile_names
 * (no -g: the symbol table, not DWARF, names the function.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#define EVIL "\x1b[2J\x1b[31mX"

static int ready[2], never[2];

__attribute__((noinline)) void hostile_fn(void) {
	char b;
	if (write(ready[1], "r", 1) != 1) return;
	while (read(never[0], &b, 1) != 0) {
	}
	__asm__ volatile("" ::: "memory");
}

volatile unsigned long spins;

__attribute__((noinline)) void hostile_spin(void) {
	if (write(ready[1], "r", 1) != 1) return;
	for (;;) spins++;
}

static void *thread_main(void *arg) {
	if (arg) hostile_spin();
	else hostile_fn();
	return NULL;
}

int main(int argc, char **argv) {
	pthread_t t, s;
	char b;
	if (pipe(ready) || pipe(never)) return 1;
	prctl(PR_SET_NAME, EVIL);
	if (pthread_create(&t, NULL, thread_main, NULL)) return 1;
	pthread_setname_np(t, EVIL);
	if (read(ready[0], &b, 1) != 1) return 1;
	if (argc > 1 && argv[1][0] == 's') {
		if (pthread_create(&s, NULL, thread_main, "spin")) return 1;
		pthread_setname_np(s, EVIL);
		if (read(ready[0], &b, 1) != 1) return 1;
	}
	printf("ready %p\n", (void *)hostile_fn);
	fflush(stdout);
	while (read(0, &b, 1) > 0) {
	}
	return 0;
}
