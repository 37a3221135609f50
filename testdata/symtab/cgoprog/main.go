// Command cgoprog is a test target for symtab: a cgo program, linked
// externally, so runtime.text is not the start of .text.
package main

// static int add(int a, int b) { return a + b; }
// int call_add(int a) { return add(a, 2); }
import "C"

import "fmt"

var sink int

//go:noinline
func goSide(n int) int {
	for i := 0; i < n; i++ {
		sink += i
	}
	return int(C.call_add(C.int(n))) + sink
}

//go:noinline
func other(n int) int { return goSide(n) * 2 }

func main() { fmt.Println(other(3)) }
