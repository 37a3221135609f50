// Package contain turns a panic into an error, so that a bug met while
// handling one thread or one process (unwinding, symbolizing, rendering
// bytes the target controls) costs that thread or process, not the whole
// command.
//
// It imports nothing of the project. Recovering is only right where the
// work is self-contained: the caller must drop whatever the panicking code
// was building.
package contain

import (
	"fmt"
	"runtime"
	"strings"
)

// Panic is the error a contained panic becomes.
type Panic struct {
	What  string // what was being done ("unwinding thread 12")
	Value any    // the value passed to panic
	Where string // the function and line that panicked, when known
}

func (p *Panic) Error() string {
	s := fmt.Sprintf("internal error while %s: %v", p.What, p.Value)
	if p.Where != "" {
		s += " (at " + p.Where + ")"
	}
	return s + "; please report it"
}

// Call runs fn and returns the panic it raised, if any, as a *Panic.
func Call(what string, fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &Panic{What: what, Value: v, Where: where()}
		}
	}()
	fn()
	return nil
}

// where names the innermost frame outside the runtime and this package:
// Do is Call for a function that returns an error: fn's error, or its
// panic as a *Panic.
func Do(what string, fn func() error) (err error) {
	if perr := Call(what, func() { err = fn() }); perr != nil {
		return perr
	}
	return err
}

// the code that panicked.
func where() string {
	var pcs [32]uintptr
	n := runtime.Callers(1, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") &&
			f.Function != "stackshot/internal/contain.where" &&
			!strings.HasPrefix(f.Function, "stackshot/internal/contain.Call") &&
			!strings.HasPrefix(f.Function, "stackshot/internal/contain.Do") {
			i := strings.LastIndexByte(f.File, '/')
			return fmt.Sprintf("%s %s:%d", f.Function, f.File[i+1:], f.Line)
		}
		if !more {
			return ""
		}
	}
}
