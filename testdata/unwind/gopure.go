// Unwinder test target: a pure Go program (no .eh_frame; frame pointers,
// and .debug_frame unless built with -ldflags=-w) blocked in read(2).
// Built by unwind's tests: go build -o gopure gopure.go
package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

func init() { runtime.LockOSThread() }

//go:noinline
func goB(fd int) {
	var b [1]byte
	if _, err := syscall.Read(fd, b[:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

//go:noinline
func goA(fd int) { goB(fd) }

func main() {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		panic(err)
	}
	fmt.Println("ready")
	goA(p[0])
}
