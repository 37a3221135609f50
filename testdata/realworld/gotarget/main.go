// Real-world test target: a plain Go program. The main goroutine is blocked
// reading stdin in main.stdinB -> main.stdinA -> main.main; other goroutines
// wait on a channel, sleep and wait on a mutex; with "spin", one goroutine
// spins in main.spinB -> main.spinA. Prints "ready" when in place.
// Built by cmd/stackshot's realworld tests: go build -o BIN main.go
package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"
)

//go:noinline
func chanWaitB(c chan int) int { return <-c }

//go:noinline
func chanWaitA(c chan int) int { return chanWaitB(c) }

//go:noinline
func sleepB() { time.Sleep(time.Hour) }

//go:noinline
func sleepA() { sleepB() }

var sink int

//go:noinline
func spinB() {
	for i := 0; ; i++ {
		sink += i
	}
}

//go:noinline
func spinA() { spinB() }

//go:noinline
func stdinB() { bufio.NewReader(os.Stdin).ReadString('\n') }

//go:noinline
func stdinA() { stdinB() }

func main() {
	c := make(chan int)
	var mu sync.Mutex
	mu.Lock()
	go chanWaitA(c)
	go sleepA()
	go func() { mu.Lock() }()
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		go spinA()
	}
	time.Sleep(50 * time.Millisecond)
	fmt.Println("ready")
	stdinA()
}
