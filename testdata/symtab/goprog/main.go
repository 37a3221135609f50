// Command goprog is a test target for symtab: a Go program with a few
// non-inlined functions. With an argument it prints "ready" and spins.
package main

import (
	"fmt"
	"os"
	"time"
)

var sink int

//go:noinline
func leafWork(n int) int {
	for i := 0; i < n; i++ {
		sink += i * 3
	}
	return sink
}

type walker struct{ depth int }

// mix is small enough for the compiler to inline into step.
func mix(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i ^ n // mix body
	}
	return s
}

//go:noinline
func (w *walker) step(n int) int {
	return leafWork(n+w.depth) + mix(n) // step calls mix
}

//go:noinline
func spin() {
	for {
		sink++
		time.Sleep(time.Millisecond)
	}
}

func main() {
	w := &walker{depth: len(os.Args)}
	r := w.step(10)
	if len(os.Args) > 1 {
		fmt.Println("ready", r)
		spin()
	}
}
