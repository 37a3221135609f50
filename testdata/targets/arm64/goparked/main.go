// Command goparked parks goroutines in known places, on a few threads,
// and prints "ready"; stackshot's arm64 test then aborts it under qemu
// (GOTRACEBACK=crash: the runtime prints every goroutine and thread and
// dies of SIGABRT, and qemu writes the guest's core).
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

var (
	never   = make(chan int)
	mu      sync.Mutex
	started sync.WaitGroup
)

//go:noinline
func chanWait() int {
	started.Done()
	return <-never
}

//go:noinline
func chanOuter() int { return chanWait() + 1 }

//go:noinline
func lockWait() {
	started.Done()
	mu.Lock()
}

//go:noinline
func sleeper() {
	started.Done()
	time.Sleep(time.Hour)
}

// pipeReader holds its own thread in a read(2) that never returns.
//
//go:noinline
func pipeReader(fd int) {
	runtime.LockOSThread()
	started.Done()
	var b [1]byte
	syscall.Read(fd, b[:])
}

func main() {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		panic(err)
	}
	mu.Lock()
	started.Add(5)
	go func() { fmt.Println(chanOuter()) }()
	go lockWait()
	go sleeper()
	go pipeReader(p[0])
	go pipeReader(p[0])
	started.Wait()
	fmt.Println("ready")
	os.Stdout.Sync()
	<-never
}
