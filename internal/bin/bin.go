// Package bin holds the small helpers every parser of target-controlled
// bytes in stackshot shares: a sticky-error decoder over a byte slice, the
// one error type for malformed input, and the guard that turns a panic of
// a parser (ours or the standard library's debug/* packages, which are not
// hardened) into an error. It imports nothing of the project, so unwind
// and symtab can both use it without importing each other.
package bin

import (
	"fmt"
	"runtime/debug"
)

// FormatError reports malformed input: which section (or file part), at
// which offset in it, and what is wrong.
type FormatError struct {
	Section string
	Offset  uint64
	Msg     string
}

func (e *FormatError) Error() string {
	if e.Section == "" {
		return "malformed elf: " + e.Msg
	}
	return fmt.Sprintf("malformed %s at %#x: %s", e.Section, e.Offset, e.Msg)
}

// PanicError is a panic caught by Safe.
type PanicError struct {
	What  string
	Value any
	Stack []byte // of the panicking goroutine, for a bug report
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: malformed input (panic: %v)", e.What, e.Value)
}

// Safe runs fn and turns a panic in it into a *PanicError naming what was
// being done. Use it around every call that parses hostile bytes: a bug
// there then costs one module its names, not the whole run.
func Safe(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{What: what, Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}
