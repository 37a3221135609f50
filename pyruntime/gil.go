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
// is. The owner is named only when exactly one thread holds a GIL and
// its own stack does not wait for it (then the GIL changed hands between
// the capture of the stacks and the read of the interpreter, and no
// thread is marked as holding it): otherwise it is unknown.
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
