// Unwinder test target: Go calling C through cgo, blocked in read.
// Built by unwind's tests: go build -o gocgo gocgo.go
package main

/*
#include <stdio.h>
#include <unistd.h>
static int fds[2];
__attribute__((noinline)) static void c_block2(void) {
	char b;
	if (read(fds[0], &b, 1) < 0) perror("read");
}
__attribute__((noinline)) static void c_block(void) { c_block2(); }
static void c_init(void) { if (pipe(fds) != 0) perror("pipe"); }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
)

//go:noinline
func goB() { C.c_block() }

//go:noinline
func goA() { goB() }

func main() {
	runtime.LockOSThread()
	C.c_init()
	fmt.Println("ready")
	os.Stdout.Sync()
	goA()
}
