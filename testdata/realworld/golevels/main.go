// Real-world test target for Go names and frame sizes: the main goroutine
// blocks reading stdin in main.level3 < main.level2 < main.level1 <
// main.main; other goroutines wait on a channel and sleep. Prints "ready"
// when in place. The "@name" comments mark the lines the frames of the
// main goroutine report (tests read them from this file).
// Built by cmd/stackshot's Go names tests in several ways (plain, -s -w,
// Debian's PIE with external linking then stripped, static, Go 1.19).
package main

import (
	"fmt"
	"os"
	"time"
)

var sink []byte

//go:noinline
func level3(buf []byte) int {
	n, _ := os.Stdin.Read(buf) // @level3
	return n
}

//go:noinline
func level2(buf []byte) int {
	return level3(buf) + 1 // @level2
}

//go:noinline
func level1() int {
	buf := make([]byte, 64)
	n := level2(buf) // @level1
	sink = buf
	return n
}

//go:noinline
func waitChan(c chan int) int { return <-c }

//go:noinline
func sleeper() { time.Sleep(time.Hour) }

func main() {
	c := make(chan int)
	go waitChan(c)
	go sleeper()
	time.Sleep(20 * time.Millisecond)
	fmt.Println("ready")
	os.Stdout.Sync()
	n := level1() // @main
	fmt.Println(n, len(sink))
}
