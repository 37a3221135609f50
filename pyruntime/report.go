package pyruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"stackshot/report"
)

// IsEval reports whether native function fn is the interpreter's eval
// function, in whose frame Python frames run (a compiler's split-off
// part, "_PyEval_EvalFrameDefault.cold", included).
func IsEval(fn string) bool {
	const eval = "_PyEval_EvalFrameDefault"
	return fn == eval || strings.HasPrefix(fn, eval+".")
}

// EvalModules are the modules of rp's threads' frames that run the
// interpreter's eval function: where a CPython interpreter is, whatever
// the file's name. (Python frames exist only inside such a frame: a
// process with none on any stack shows no Python frames to miss.)
func EvalModules(rp *report.Process) map[string]bool {
	out := map[string]bool{}
	for i := range rp.Threads {
		for _, f := range rp.Threads[i].Frames {
			if f.Kind == "user" && f.Module != "" && IsEval(f.Function) {
				out[f.Module] = true
			}
		}
	}
	return out
}

// Inline puts the Python frames of pt into thread t's native frames:
// each run of frames that one eval call executes (see Frame.Entry) just
// inside that call's native frame, innermost first. It returns "" or why
// the two did not match (the thread ran between the native capture and
// this read, or its native stack was cut short): the runs left over are
// then put inside the outermost eval frame, or past the native frames
// when none is named.
func Inline(t *report.Thread, pt *Thread) (mismatch string) {
	if len(pt.Frames) == 0 {
		return ""
	}
	var runs [][]Frame
	start := 0
	for i, f := range pt.Frames {
		if f.Entry {
			runs = append(runs, pt.Frames[start:i+1])
			start = i + 1
		}
	}
	var evals []int
	for i := range t.Frames {
		if t.Frames[i].Kind == "user" && IsEval(t.Frames[i].Function) {
			evals = append(evals, i)
		}
	}
	if len(runs) != len(evals) {
		mismatch = fmt.Sprintf("%d calls of the interpreter on the Python stack, %d on the native one", len(runs), len(evals))
	}
	out := make([]report.Frame, 0, len(t.Frames)+len(pt.Frames))
	run := 0
	for i := range t.Frames {
		if run < len(runs) && run < len(evals) && evals[run] == i {
			n := 1
			if run == len(evals)-1 {
				n = len(runs) - run // the leftovers too
			}
			for _, r := range runs[run : run+n] {
				out = appendFrames(out, r)
			}
			run += n
		}
		out = append(out, t.Frames[i])
	}
	for ; run < len(runs); run++ {
		out = appendFrames(out, runs[run])
	}
	t.Frames = out
	return mismatch
}

func appendFrames(out []report.Frame, fs []Frame) []report.Frame {
	for _, f := range fs {
		out = append(out, report.Frame{Kind: "python", Function: f.QualName, File: f.File, Line: f.Line})
	}
	return out
}

// Merge puts each Python thread's frames and threading name (Names) into
// the thread of rp it runs on (matched by native thread id, see
// MatchTIDs), and says in rp's warnings what could not be: frames that
// did not check out, threads that kept running while read, Python and
// native stacks that did not match.
func Merge(rp *report.Process, rt *Runtime, threads []Thread) {
	tids := map[int]bool{}
	for i := range rp.Threads {
		tids[rp.Threads[i].TID] = true
	}
	byTID := ByTID(rt, threads, tids)
	for i := range threads {
		if pt := &threads[i]; !tids[pt.NativeID] && len(pt.Frames) > 0 {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames of thread state %#x (thread_id) not shown: no thread of the process matches it", pt.ThreadID))
		}
	}
	for i := range rp.Threads {
		t := &rp.Threads[i]
		pt := byTID[t.TID]
		if pt == nil {
			continue
		}
		t.HoldsGIL = t.HoldsGIL || pt.HoldsGIL
		t.PythonName = pt.Name
		if pt.Err != nil {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("thread %d: Python frames incomplete (%v)", t.TID, pt.Err))
		}
		if pt.Moved {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("thread %d: its Python frames kept changing while read (it runs Python code): shown as last read", t.TID))
		}
		if why := Inline(t, pt); why != "" {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("thread %d: Python frames placed by order only (%s: it ran between the two reads, or its native stack is incomplete)", t.TID, why))
		}
	}
}

// ByTID matches threads to the process's threads tids (see MatchTIDs)
// and indexes them by thread id. A thread that runs a subinterpreter has
// a thread state in each interpreter it entered: their frames are joined,
// the newer interpreter's (earlier in the list) inside.
func ByTID(rt *Runtime, threads []Thread, tids map[int]bool) map[int]*Thread {
	rt.MatchTIDs(threads, tids)
	out := make(map[int]*Thread, len(threads))
	for i := range threads {
		pt := &threads[i]
		if !tids[pt.NativeID] {
			continue
		}
		prev := out[pt.NativeID]
		if prev == nil {
			out[pt.NativeID] = pt
			continue
		}
		both := *prev
		both.Frames = append(append([]Frame(nil), prev.Frames...), pt.Frames...)
		both.HoldsGIL, both.Moved, both.Err = prev.HoldsGIL || pt.HoldsGIL, prev.Moved || pt.Moved, errors.Join(prev.Err, pt.Err)
		if pt.Name != "" {
			// (the older interpreter's: the name the thread was
			// started with, not a subinterpreter's "MainThread")
			both.Name = pt.Name
		}
		out[pt.NativeID] = &both
	}
	return out
}

// AppendKey appends what tells pt's Python frames from others' to a
// sample's key.
func AppendKey(b []byte, pt *Thread) []byte {
	b = append(b, 2)
	for _, f := range pt.Frames {
		b = append(append(b, f.QualName...), 0)
		b = append(append(b, f.File...), 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(f.Line))
		if f.Entry {
			b = append(b, 1)
		}
	}
	return b
}
