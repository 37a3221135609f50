// embed.c: a C program that embeds CPython and runs the script argv[1]
// (embed.py) in it; built both against libpython3.11.so and with
// libpython3.11.a linked in, so no file of the process is named python.
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: embed SCRIPT\n");
        return 2;
    }
    Py_Initialize();
    FILE *f = fopen(argv[1], "r");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    int rc = PyRun_SimpleFileEx(f, argv[1], 1);
    Py_Finalize();
    return rc == 0 ? 0 : 1;
}
