// garbage.c: a process that looks like CPython 3.11 to a reader (named
// python3.11 by the test, exporting _PyRuntime, Py_Version and the type
// objects) whose _PyRuntime holds nothing but pointers to itself: every
// structure read from it is garbage. Prints "ready", then blocks in read.
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

uintptr_t _PyRuntime[1024];
const unsigned long Py_Version = 0x030B02F0;
uintptr_t PyCode_Type[32], PyUnicode_Type[32], PyBytes_Type[32];

int main(void) {
	for (int i = 0; i < 1024; i++)
		_PyRuntime[i] = (uintptr_t)_PyRuntime;
	printf("ready\n");
	fflush(stdout);
	char c;
	return read(0, &c, 1) < 0;
}
