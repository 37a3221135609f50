package pyruntime

import (
	"testing"

	"stackshot/report"
)

// TestNameGILWaitsCaptured: when the interpreter was read after the GIL
// moved (its holder then was caught in take_gil), the holder is the one
// thread the capture caught running bytecode; never one caught in a
// system call, in take_gil, in a module other than the interpreter's, or
// one of two such threads.
func TestNameGILWaitsCaptured(t *testing.T) {
	const py = "/usr/lib/libpython3.11.so"
	fr := func(fn, mod string) report.Frame { return report.Frame{Kind: "user", Function: fn, Module: mod} }
	pyf := report.Frame{Kind: "python", Function: "spin", File: "app.py", Line: 9}
	eval := fr("_PyEval_EvalFrameDefault", py)
	waiting := func(tid int) report.Thread { // in take_gil, inside spin
		return report.Thread{TID: tid, Capture: "ptrace", Frames: []report.Frame{fr("__futex_abstimed_wait_common", "/lib/libc.so.6"),
			fr("take_gil.lto_priv.0", py), pyf, eval}}
	}
	running := func(tid int, inner ...report.Frame) report.Thread {
		return report.Thread{TID: tid, Capture: "ptrace", Frames: append(inner, pyf, eval)}
	}
	for _, c := range []struct {
		name   string
		runner report.Thread
		other  *report.Thread
		want   int
	}{
		{"in the eval loop", running(3, eval), nil, 3},
		{"in a helper the loop calls", running(3, fr("long_add", py), fr("binary_op1", py)), nil, 3},
		{"in libc", running(3, fr("memcpy", "/lib/libc.so.6")), nil, 0},
		{"in an extension", running(3, fr("compute", "/x/_ext.so")), nil, 0},
		{"unnamed", running(3, fr("", py)), nil, 0},
		{"dropping the GIL", running(3, fr("drop_gil.lto_priv.0", py), fr("_Py_HandlePending", py)), nil, 0},
		{"blocked on a lock", running(3, fr("PyThread_acquire_lock_timed", py)), nil, 0},
		{"two runners", running(3, eval), &report.Thread{TID: 4, Capture: "ptrace", Frames: []report.Frame{eval, pyf, eval}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rp := &report.Process{Threads: []report.Thread{waiting(1), waiting(2), c.runner}}
			rp.Threads[0].HoldsGIL = true // the interpreter's holder when read: caught waiting
			if c.other != nil {
				rp.Threads = append(rp.Threads, *c.other)
			}
			NameGILWaits(rp)
			for _, i := range []int{0, 1} {
				w := rp.Threads[i].WaitingFor
				if w == nil || w.Kind != report.WaitPythonGIL {
					t.Fatalf("thread %d: %+v, want a GIL wait", rp.Threads[i].TID, w)
				}
				got := 0
				if w.OwnerTID != nil {
					got = *w.OwnerTID
				}
				if got != c.want {
					t.Errorf("thread %d: owner %d, want %d (note %q)", rp.Threads[i].TID, got, c.want, w.Note)
				}
			}
			if held := rp.Threads[2].HoldsGIL; held != (c.want == 3) {
				t.Errorf("runner marked holding the GIL: %v", held)
			}
			if rp.Threads[0].HoldsGIL {
				t.Error("the read-time holder, caught waiting, still marked holding the GIL")
			}
		})
	}
}
