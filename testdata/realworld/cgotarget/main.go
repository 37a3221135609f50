// Real-world test target: Go calling C through cgo; the main goroutine is
// blocked in read(2) inside C: c_read2 <- c_read1 <- main.goReadB <-
// main.goReadA <- main.main. Prints "ready" first.
// Built by cmd/stackshot's realworld tests: go build -o BIN main.go
package main

/*
#include <unistd.h>
static int fds[2];
__attribute__((noinline)) static int c_read2(void) { char b; return (int)read(fds[0], &b, 1); }
__attribute__((noinline)) int c_read1(void) { int r = c_read2(); return r + 1; }
static void c_init(void) { if (pipe(fds) != 0) _exit(2); }
*/
import "C"

import (
	"fmt"
	"os"
	"time"
)

//go:noinline
func goReadB() { C.c_read1() }

//go:noinline
func goReadA() { goReadB() }

func main() {
	C.c_init()
	go func() { time.Sleep(time.Hour) }()
	fmt.Println("ready")
	os.Stdout.Sync()
	goReadA()
}
