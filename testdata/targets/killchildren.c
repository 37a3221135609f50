// killchildren: the attacker of the sandbox tests, run as another user
// (nobody). It says "ready", reads a pid from stdin and answers
// "watching"; then it sends SIGKILL to every child of that process the
// moment it sees one, again and again, until that process has exited, and
// prints "killed K refused R": how many children the kernel let it kill,
// and how many refused it every time.
//
// Built by the tests: gcc -O2 -o killchildren killchildren.c
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXSEEN 4096

static int seen[MAXSEEN], fate[MAXSEEN]; // fate: 1 killed, 2 refused
static int nseen;

static int parent_of(const char *pid) {
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	int ppid = -1;
	if (p && sscanf(p + 2, "%*c %d", &ppid) != 1)
		ppid = -1;
	return ppid;
}

static void note(int pid, int how) {
	for (int i = 0; i < nseen; i++)
		if (seen[i] == pid) {
			if (how == 1)
				fate[i] = 1;
			return;
		}
	if (nseen < MAXSEEN) {
		seen[nseen] = pid;
		fate[nseen++] = how;
	}
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	int target;
	if (scanf("%d", &target) != 1)
		return 2;
	printf("watching\n");
	for (;;) {
		if (kill(target, 0) != 0 && errno == ESRCH)
			break;
		DIR *d = opendir("/proc");
		if (!d)
			return 3;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			if (parent_of(e->d_name) != target)
				continue;
			int pid = atoi(e->d_name);
			if (kill(pid, SIGKILL) == 0)
				note(pid, 1);
			else if (errno == EPERM)
				note(pid, 2);
		}
		closedir(d);
	}
	int killed = 0, refused = 0;
	for (int i = 0; i < nseen; i++) {
		if (fate[i] == 1)
			killed++;
		else
			refused++;
	}
	printf("killed %d refused %d\n", killed, refused);
	return 0;
}
