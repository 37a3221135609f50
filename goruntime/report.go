package goruntime

import (
	"encoding/binary"
	"fmt"

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
	// Goroutines parked at the same pcs share their frames' symbols, and
	// those with the same stack share one (read-only) frame slice.
	cache := map[uint64][]report.Frame{}
	stacks := map[string][]report.Frame{}
	var key []byte
	for i := range s.Goroutines {
		g := &s.Goroutines[i]
		rg := report.Goroutine{GoID: g.ID, Status: g.Status, WaitReason: g.WaitReason, TID: g.ThreadID}
		if g.WaitSince > 0 && nowNS >= g.WaitSince {
			rg.WaitingNS, rg.HasWaiting = nowNS-g.WaitSince, true
		}
		if g.Status == statusRunning {
			rg.Frames, rg.Error = threadFrames(byTID[g.ThreadID])
		}
		key = key[:0]
		for _, pc := range g.PCs {
			key = binary.LittleEndian.AppendUint64(key, pc)
		}
		if fr, ok := stacks[string(key)]; ok && len(g.PCs) > 0 {
			rg.Frames = fr
		} else {
			for k, pc := range g.PCs {
				fr, ok := cache[pc]
				if !ok {
					fr = sym.Symbolize(pc, false)
					for j := range fr {
						fr[j].Method = MethodPclntab
					}
					if len(fr) == 1 && fr[0].Function == "" && k < len(g.Funcs) {
						// The symbolizer found no table: the name the
						// program's own pclntab gives.
						fr[0].Function = g.Funcs[k]
					}
					cache[pc] = fr
				}
				rg.Frames = append(rg.Frames, fr...)
			}
			if len(g.PCs) > 0 {
				stacks[string(key)] = rg.Frames
			}
		}
		if g.GoPC != 0 && g.ID != 1 { // (the main goroutine's creator is the runtime's start)
			rg.CreatedBy = createdBy(sym, g)
		}
		out = append(out, rg)
	}
	return out
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

// threadFrames returns a running goroutine's frames: its thread's user
// frames, when they are a goroutine's (they end at runtime.goexit). The
// thread was captured before the goroutine list was read: it may have
// been in the scheduler, or running another goroutine, then.
func threadFrames(th *report.Thread) ([]report.Frame, string) {
	if th == nil {
		return nil, "running on a thread that was not captured"
	}
	var fr []report.Frame
	for _, f := range th.Frames {
		if f.Kind == "user" {
			fr = append(fr, f)
		}
	}
	if len(fr) == 0 || fr[len(fr)-1].Function != "runtime.goexit" {
		return nil, fmt.Sprintf("running on thread %d, which was not running a goroutine when it was captured", th.TID)
	}
	return fr, ""
}
