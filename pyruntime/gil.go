package pyruntime

import (
	"fmt"
	"strings"

	"stackshot/report"
)

// NameGILWaits says of each thread of rp waiting to take the GIL (in the
// interpreter's take_gil, on the native stack inside its Python frames)
// that it waits for the GIL, held by the thread marked as holding it
// (Merge) and running Python where that thread's innermost Python frame
// is. The holder the interpreter gave is named when exactly one thread
// holds a GIL and its own stack does not wait for it. Otherwise the GIL
// changed hands between the capture of the stacks and the read of the
// interpreter (on a loaded machine a holder keeps it 5 ms, the read comes
// after the symbols), or was between holders when read: then the holder
// is the one thread the capture caught running bytecode (runsBytecode),
// which only a thread holding the GIL does. Failing both it is unknown.
func NameGILWaits(rp *report.Process) {
	holder := -1
	for i := range rp.Threads {
		if rp.Threads[i].HoldsGIL {
			if holder >= 0 {
				holder = -2 // subinterpreters, each with its own GIL
				break
			}
			holder = i
		}
	}
	moved := holder >= 0 && inTakeGIL(&rp.Threads[holder])
	if moved {
		// The GIL changed hands between the capture of the stacks and
		// the read of the interpreter: the report has no holder.
		rp.Threads[holder].HoldsGIL = false
	}
	if holder == -1 || moved {
		if h := bytecodeRunner(rp); h >= 0 {
			holder, moved = h, false
			rp.Threads[h].HoldsGIL = true
		}
	}
	for i := range rp.Threads {
		t := &rp.Threads[i]
		if !inTakeGIL(t) {
			continue
		}
		w := &report.WaitingFor{Kind: report.WaitPythonGIL}
		switch {
		case holder == -2:
			w.Note = "several interpreters hold a GIL of their own: which one this thread waits for is not known"
		case moved:
			w.Note = "the GIL changed hands between the capture of the stacks and the read of the interpreter"
		case holder < 0:
			w.Note = "no thread shown held the GIL when the interpreter was read"
		default:
			h := &rp.Threads[holder]
			tid := h.TID
			w.OwnerTID, w.OwnerName = &tid, h.ShownName(rp.Comm)
			w.OwnerState = &report.OwnerState{State: h.State, PythonAt: pythonAt(h)}
		}
		t.WaitingFor = w
	}
}

// bytecodeRunner is the index of the one thread of rp that runsBytecode,
// or -1 (none, or several: the GIL moved while the stacks were captured).
func bytecodeRunner(rp *report.Process) int {
	mods := EvalModules(rp)
	found := -1
	for i := range rp.Threads {
		if runsBytecode(&rp.Threads[i], mods) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

// runsBytecode reports whether thread t was caught running the
// interpreter with the GIL: stopped while it ran (no system call), every
// native frame inside its innermost Python frame named and in one of the
// interpreter's modules (mods, EvalModules), none of them a function that
// takes, drops or waits for the GIL or a lock. Code that releases the GIL
// does so to block (a system call, a lock: in libc) or to compute in an
// extension module, so such a thread holds it.
func runsBytecode(t *report.Thread, mods map[string]bool) bool {
	if t.Capture != "ptrace" || (t.Syscall != nil && t.Syscall.InCall) {
		return false
	}
	for _, f := range t.Frames {
		switch {
		case f.Kind == "kernel":
			continue
		case f.Kind == "python":
			return true
		case f.Kind != "user" || f.Function == "" || !mods[f.Module] || gilFunction(f.Function):
			return false
		}
	}
	return false
}

// gilFunction reports whether fn (a compiler's ".lto_priv.0" or ".cold"
// suffix aside) is one of the interpreter's functions that take, drop
// or wait for the GIL, or block on a lock.
func gilFunction(fn string) bool {
	if i := strings.IndexByte(fn, '.'); i > 0 {
		fn = fn[:i]
	}
	switch fn {
	case "take_gil", "drop_gil", "PyEval_SaveThread", "PyEval_RestoreThread", "PyEval_AcquireThread",
		"PyEval_ReleaseThread", "PyEval_AcquireLock", "PyEval_ReleaseLock", "_PyEval_ReleaseLock",
		"PyGILState_Ensure", "PyGILState_Release", "_PyEval_AcquireLock":
		return true
	}
	return strings.HasPrefix(fn, "PyThread_") || strings.HasPrefix(fn, "PyMutex_") || strings.HasPrefix(fn, "_PyMutex_") ||
		strings.HasPrefix(fn, "_PySemaphore_") || strings.HasPrefix(fn, "_PyParkingLot_")
}

// inTakeGIL reports whether t's innermost native frames, before any Python
// frame, include the interpreter's take_gil.
func inTakeGIL(t *report.Thread) bool {
	for _, f := range t.Frames {
		if f.Kind == "python" {
			return false
		}
		if f.Kind == "user" && (f.Function == "take_gil" || strings.HasPrefix(f.Function, "take_gil.")) {
			return true
		}
	}
	return false
}

// pythonAt is where t's innermost Python frame is ("app.py:88"), or "".
func pythonAt(t *report.Thread) string {
	for _, f := range t.Frames {
		if f.Kind == "python" {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
	}
	return ""
}
