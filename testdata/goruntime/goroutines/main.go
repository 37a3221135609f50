// Command goroutines parks goroutines in known places for stackshot's
// goroutine tests. It prints "ready" once they are parked, then serves
// one command per stdin line:
//
//	stack FILE  write runtime.Stack(all) to FILE, answer "ok"
//	churn       start goroutines that are created and end in a tight loop
//	spin        start a goroutine spinning in main.spinner (running)
//	gc          run a garbage collection (which records how long
//	            goroutines have been waiting)
//	deep N      park a goroutine in a channel receive under N calls of
//	            main.deep
//	exit        exit
//
// Flags: -park N parks N more goroutines in a channel receive.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	never   = make(chan int)
	mu      sync.Mutex
	wg      sync.WaitGroup
	started sync.WaitGroup
)

//go:noinline
func level3() int {
	started.Done()
	return <-never
}

//go:noinline
func level2() int { return level3() + 1 }

//go:noinline
func level1() { fmt.Println(level2()) }

//go:noinline
func selector(a, b chan int) {
	started.Done()
	select {
	case <-a:
	case <-b:
	}
}

//go:noinline
func locker() {
	started.Done()
	mu.Lock()
	mu.Unlock()
}

//go:noinline
func sleeper() {
	started.Done()
	time.Sleep(time.Hour)
}

//go:noinline
func waiter() {
	started.Done()
	wg.Wait()
}

//go:noinline
func acceptor(l net.Listener) {
	started.Done()
	l.Accept()
}

//go:noinline
func parked(ch chan int) {
	started.Done()
	<-ch
}

//go:noinline
func deep(n int, ready chan bool) int {
	if n == 0 {
		ready <- true
		return <-never
	}
	return deep(n-1, ready) + 1
}

var spinning int64

//go:noinline
func spinner() {
	for {
		spinning++
	}
}

//go:noinline
func churn() {
	for {
		done := make(chan bool)
		for i := 0; i < 64; i++ {
			go func() { done <- true }()
		}
		for i := 0; i < 64; i++ {
			<-done
		}
	}
}

func main() {
	park := flag.Int("park", 0, "extra goroutines parked in a channel receive")
	flag.Parse()
	mu.Lock()
	wg.Add(1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	started.Add(6 + *park)
	go level1()
	go selector(make(chan int), make(chan int))
	go locker()
	go sleeper()
	go waiter()
	go acceptor(l)
	for i := 0; i < *park; i++ {
		go parked(never)
	}
	started.Wait()
	// Let each reach its park (Done comes just before it).
	for i := 0; i < 100; i++ {
		runtime.Gosched()
	}
	time.Sleep(50 * time.Millisecond)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "stack":
			buf := make([]byte, 64<<20)
			n := runtime.Stack(buf, true)
			if err := os.WriteFile(f[1], buf[:n], 0o644); err != nil {
				fmt.Println("error:", err)
				continue
			}
			fmt.Println("ok")
		case len(f) == 1 && f[0] == "churn":
			go churn()
			fmt.Println("ok")
		case len(f) == 1 && f[0] == "spin":
			go spinner()
			fmt.Println("ok")
		case len(f) == 2 && f[0] == "deep":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				fmt.Println("error:", err)
				continue
			}
			ready := make(chan bool)
			go deep(n, ready)
			<-ready
			time.Sleep(20 * time.Millisecond) // (until it parks)
			fmt.Println("ok")
		case len(f) == 1 && f[0] == "gc":
			runtime.GC()
			fmt.Println("ok")
		case len(f) == 1 && f[0] == "exit":
			os.Exit(0)
		default:
			fmt.Println("unknown command")
		}
	}
}
