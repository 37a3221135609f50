package goruntime

import (
	"encoding/binary"
	"fmt"
	"slices"

	"stackshot/report"
)

// Symbolizer names a pc of the program: its logical frames, innermost
// (inlined) first; exact false looks the pc up at pc-1 (a return address).
type Symbolizer interface {
	Symbolize(pc uint64, exact bool) []report.Frame
}

// SymbolizerFunc adapts a function to Symbolizer.
type SymbolizerFunc func(pc uint64, exact bool) []report.Frame

// Symbolize implements Symbolizer.
func (f SymbolizerFunc) Symbolize(pc uint64, exact bool) []report.Frame { return f(pc, exact) }

// MethodPclntab is the frame method of goroutine frames: found with the
// pclntab's frame sizes.
const MethodPclntab = "pclntab"

// Report turns a snapshot into the report's goroutines, symbolized through
// sym so that names, files and lines are those of the threads' frames.
// Goroutines with the same stack share one Frames slice: read-only.
// nowNS is the program's clock now (its nanotime: CLOCK_MONOTONIC on
// Linux), for how long goroutines have waited. A running goroutine's
// stack is its thread's: its user frames are taken from threads.
func (s *Snapshot) Report(sym Symbolizer, nowNS int64, threads []report.Thread) []report.Goroutine {
	out := make([]report.Goroutine, 0, len(s.Goroutines))
	byTID := map[int]*report.Thread{}
	for i := range threads {
		byTID[threads[i].TID] = &threads[i]
	}
	names := stackNamer{sym: sym, cache: map[uint64][]report.Frame{}, stacks: map[string][]report.Frame{}}
	for i := range s.Goroutines {
		g := &s.Goroutines[i]
		rg := report.Goroutine{GoID: g.ID, Status: g.Status, WaitReason: g.WaitReason, TID: g.ThreadID}
		if g.WaitSince > 0 && nowNS >= g.WaitSince {
			rg.WaitingNS, rg.HasWaiting = nowNS-g.WaitSince, true
		}
		if g.Status == statusRunning {
			rg.Frames, rg.Error = runningFrames(g, threads, byTID[g.ThreadID])
		}
		if rg.Frames == nil {
			rg.Frames = names.frames(g)
			if g.Cut != "" {
				rg.Error = g.Cut
			}
		}
		if g.GoPC != 0 && g.ID != 1 { // (the main goroutine's creator is the runtime's start)
			rg.CreatedBy = createdBy(sym, g)
		}
		out = append(out, rg)
	}
	return out
}

// stackNamer symbolizes goroutines' pcs: goroutines parked at the same
// pcs share their frames' symbols, and those with the same stack share
// one (read-only) frame slice.
type stackNamer struct {
	sym    Symbolizer
	cache  map[uint64][]report.Frame // by pc
	stacks map[string][]report.Frame // by the stack's pcs
	key    []byte
}

// frames names g's PCs.
func (n *stackNamer) frames(g *Goroutine) []report.Frame {
	if len(g.PCs) == 0 {
		return nil
	}
	n.key = n.key[:0]
	for _, pc := range g.PCs {
		n.key = binary.LittleEndian.AppendUint64(n.key, pc)
	}
	for _, w := range g.Wrappers {
		n.key = binary.LittleEndian.AppendUint64(n.key, ^uint64(w))
	}
	if fr, ok := n.stacks[string(n.key)]; ok {
		return fr
	}
	var frames []report.Frame
	for k, pc := range g.PCs {
		fr, ok := n.cache[pc]
		if !ok {
			fr = n.sym.Symbolize(pc, false)
			for j := range fr {
				fr[j].Method = MethodPclntab
			}
			if len(fr) == 1 && fr[0].Function == "" && k < len(g.Funcs) {
				// The symbolizer found no table: the name the
				// program's own pclntab gives.
				fr[0].Function = g.Funcs[k]
			}
			n.cache[pc] = fr
		}
		if slices.Contains(g.Wrappers, k) {
			// A wrapper: its own (outermost) frame hidden, what was
			// inlined into it shown, as the runtime's traceback does.
			if len(fr) > 0 {
				fr = fr[:len(fr)-1]
			}
		}
		frames = append(frames, fr...)
	}
	n.stacks[string(n.key)] = frames
	return frames
}

// createdBy names the go statement at gopc as the runtime's traceback
// does: the function that holds it (the outermost of its logical frames),
// the position of the innermost.
func createdBy(sym Symbolizer, g *Goroutine) *report.CreatedBy {
	fr := sym.Symbolize(g.GoPC, false)
	if len(fr) == 0 {
		return nil
	}
	c := &report.CreatedBy{Function: fr[len(fr)-1].Function, File: fr[0].File, Line: fr[0].Line}
	if c.Function == "" {
		c.Function = g.GoPCFunc
	}
	if c.Function == "" {
		c.Function = "??"
	}
	if g.ParentID != 0 && g.HasParent {
		c.GoID, c.HasGoID = g.ParentID, true
	}
	return c
}

// runningFrames returns a running goroutine's frames from the thread
// that ran it when the threads were captured: the goroutine list is read
// after, and a busy program may have moved it to another thread (or run
// another goroutine on its thread) since. The thread is the one whose
// user frames end in runtime.goexit with stack pointers in the
// goroutine's stack. When none is, and the goroutine's own frames were
// read from where it left them for the system stack (g.PCs), those are
// used (nil, ""); else why there are none.
func runningFrames(g *Goroutine, threads []report.Thread, on *report.Thread) ([]report.Frame, string) {
	if on != nil {
		if fr := goroutineFrames(g, on); fr != nil {
			return fr, ""
		}
	}
	for i := range threads {
		if th := &threads[i]; th != on {
			if fr := goroutineFrames(g, th); fr != nil {
				return fr, ""
			}
		}
	}
	switch {
	case len(g.PCs) > 0:
		return nil, ""
	case on == nil:
		return nil, "running on a thread that was not captured"
	}
	return nil, fmt.Sprintf("running on thread %d, which was running other code when the threads were captured", on.TID)
}

// goroutineFrames returns th's user frames when they are g's: they end
// in runtime.goexit and hold a stack pointer inside g's stack.
func goroutineFrames(g *Goroutine, th *report.Thread) []report.Frame {
	var fr []report.Frame
	inStack := false
	for _, f := range th.Frames {
		if f.Kind == "user" {
			fr = append(fr, f)
			inStack = inStack || f.SP >= g.StackLo && f.SP < g.StackHi
		}
	}
	if len(fr) == 0 || fr[len(fr)-1].Function != "runtime.goexit" || !inStack {
		return nil
	}
	return fr
}
