/* mapfile: maps the file named by argv[1] (read-only, as a loader maps a
 * library's non-code pages), prints "ready", and waits until stdin ends.
 * The file's mapping is then in /proc/PID/maps and /proc/PID/map_files, as
 * any file a hostile process maps would be.
 *
 * Build: gcc -O2 mapfile.c -o mapfile
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2) { fprintf(stderr, "usage: mapfile FILE\n"); return 2; }
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) { perror(argv[1]); return 1; }
	void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) { perror("mmap"); return 1; }
	close(fd);
	printf("ready %p\n", p);
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {}
	return 0;
}
