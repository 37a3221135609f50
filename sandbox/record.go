//go:build linux

package sandbox

import (
	"fmt"
	"io"

	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// record's side of the child: the sampler hands it, each tick, the raw
// threads of its target (registers and stack copies) in one round trip;
// the child unwinds them with compiled CFI tables it keeps across ticks,
// and names each address the first time it meets it. What comes back is
// checked here: the parent only counts and keys the walks.

// Walk is one thread's walk, as the child answered it.
type Walk struct {
	Frames []unwind.Frame
	Stop   unwind.StopReason
	OK     bool   // false: no registers to unwind from
	Err    string // the child failed: Frames is the registers' PC only, unnamed
	// Python is the thread's Python frames (nil: none), when OpenRuntime
	// opened the target's interpreter.
	Python *pyruntime.Thread
}

// Walker unwinds, in the child, the threads of the successive captures of
// its target that record takes, and names their frames. Use it from one
// goroutine.
type Walker struct {
	c      *Child
	maps   *procmaps.Mapping         // &Maps[0] of the maps the child has (nil: none yet)
	at     procmaps.Maps             // the last walk's maps
	names  map[uint64][]report.Frame // by nameKey, for the maps the child has
	frames []unwind.Frame            // the walks' frames, reused from tick to tick
	walks  []Walk
	ths    []ptrace.Thread
	// runtime is the runtime whose frames each walk asks for too ("":
	// none), of process target (recordruntime.go); pys holds them.
	runtime string
	target  procmaps.Identity
	pys     []pyruntime.Thread
	tasks   []int
}

// Walker returns the child's walker for record.
func (c *Child) Walker() *Walker { return &Walker{c: c} }

// nameKey is an address as it is named: a return address is looked up at
// the call before it, an exact PC (frame 0, a signal's) at itself.
func nameKey(f unwind.Frame) uint64 {
	if f.Exact || f.SignalFrame {
		return f.PC | 1<<63
	}
	return f.PC &^ (1 << 63)
}

// Bounds on a walk's answer: flags of a packed frame.
const (
	packExact  = 1 << 8
	packSignal = 1 << 9
	noRegs     = ^uint64(0) // a packed walk's count: no registers
	// maxNamed bounds the names kept for one set of maps (a program's
	// distinct return addresses are far fewer).
	maxNamed = 1 << 20
)

// Walk unwinds ths, threads of p (the latest capture of the target), in
// the child: one round trip for all of them. The answer is each thread's
// walk, valid until the next call. When the child failed (now or before),
// each walk is its registers' PC alone, unnamed, with Err saying why, and
// err too.
func (w *Walker) Walk(p *ptrace.Process, ths []*ptrace.Thread) ([]Walk, error) {
	c := w.c
	c.follow(p)
	w.at = procmaps.Maps(p.Maps)
	m := &downMsg{Kind: kRecord}
	if len(p.Maps) == 0 || &p.Maps[0] != w.maps {
		// New maps: the child points its space at them, and names anew.
		head := *p
		head.Threads = nil
		m.Proc = &head
		w.maps, w.names = nil, map[uint64][]report.Frame{}
		if len(p.Maps) > 0 {
			w.maps = &p.Maps[0]
		}
	}
	w.ths = w.ths[:0]
	for _, th := range ths {
		// What the unwinder reads; the rest stays here.
		w.ths = append(w.ths, ptrace.Thread{TID: th.TID, Method: th.Method, Regs: th.Regs, Syscall: th.Syscall,
			StackAddr: th.StackAddr, Stack: th.Stack, StackLo: th.StackLo, StackHi: th.StackHi, Torn: th.Torn})
	}
	m.Threads = w.ths
	if w.runtime != "" {
		m.Runtime, m.Target = w.runtime, w.target
		w.tasks = w.tasks[:0]
		for i := range p.Threads {
			w.tasks = append(w.tasks, p.Threads[i].TID)
		}
		m.Tasks = w.tasks
	}
	up, err := c.roundTrip(m, c.killAt())
	if err == nil && up.Kind != kRecord {
		err = fmt.Errorf("unexpected %q", up.Kind)
	}
	if err == nil {
		err = w.unpack(up, len(ths))
	}
	if err == nil {
		err = w.unpackRuntime(up, len(ths))
	}
	if err != nil {
		w.maps = nil // (the next call sends the maps again, if the child lives)
		if c.NeverStarted() {
			return w.raw(ths, err.Error()), err // (the line said of it)
		}
		err = fmt.Errorf("names of process %d lost: the sandboxed parser failed (%v)", p.PID, err)
		return w.raw(ths, err.Error()), err
	}
	c.expired = c.expired || up.Expired
	c.budget = c.budget || up.Budget
	return w.walks, nil
}

// unpack checks and reads the child's answer for n threads.
func (w *Walker) unpack(up *upMsg, n int) error {
	if len(up.NamedPCs) != len(up.Frames) {
		return fmt.Errorf("%d names for %d addresses", len(up.Frames), len(up.NamedPCs))
	}
	if len(w.names)+len(up.NamedPCs) > maxNamed {
		return fmt.Errorf("more than %d addresses named", maxNamed)
	}
	ws := up.Walks
	w.walks, w.frames = w.walks[:0], w.frames[:0]
	for i := 0; i < n; i++ {
		if len(ws) < 2 {
			return fmt.Errorf("%d walks for %d threads", i, n)
		}
		cnt, stop := ws[0], ws[1]
		ws = ws[2:]
		if cnt == noRegs {
			w.walks = append(w.walks, Walk{})
			continue
		}
		if cnt > uint64(len(ws)/3) || stop > 255 {
			return fmt.Errorf("malformed walk of %d frames", cnt)
		}
		start := len(w.frames)
		for k := uint64(0); k < cnt; k++ {
			fl := ws[2]
			w.frames = append(w.frames, unwind.Frame{PC: ws[0], SP: ws[1], Method: unwind.Method(fl & 0xff),
				Exact: fl&packExact != 0, SignalFrame: fl&packSignal != 0})
			ws = ws[3:]
		}
		w.walks = append(w.walks, Walk{Stop: unwind.StopReason(stop), OK: true, Frames: w.frames[start:len(w.frames):len(w.frames)]})
	}
	if len(ws) != 0 {
		return fmt.Errorf("%d words past %d walks", len(ws), n)
	}
	// (w.frames may have moved while it grew: the walks point into the
	// final array.)
	at := 0
	for i := range w.walks {
		if k := len(w.walks[i].Frames); k > 0 {
			w.walks[i].Frames = w.frames[at : at+k : at+k]
			at += k
		}
	}
	for i, key := range up.NamedPCs {
		w.names[key] = up.Frames[i]
	}
	return nil
}

// raw is each thread's walk when the child cannot unwind: the PC of its
// registers (or of the system call it blocks in), as resolve.Unnamed
// shows it.
func (w *Walker) raw(ths []*ptrace.Thread, why string) []Walk {
	w.walks, w.frames = w.walks[:0], w.frames[:0]
	for _, th := range ths {
		pc := th.PC()
		wk := Walk{OK: true, Stop: unwind.StopNone, Err: why}
		if pc != 0 {
			wk.Frames = []unwind.Frame{{PC: pc, Exact: true, Method: unwind.MethodRegs}}
		}
		w.walks = append(w.walks, wk)
	}
	return w.walks
}

// Name appends the logical frames of physical frame f, met in a walk of
// the current maps: as resolve.Resolver.Frames names it in-process (f
// unnamed when the child did not name it).
func (w *Walker) Name(out []report.Frame, f unwind.Frame) []report.Frame {
	names, ok := w.names[nameKey(f)]
	if !ok || len(names) == 0 {
		// Its raw address: in its mapping (from /proc, as the kernel
		// wrote it), at its offset in the mapped file.
		base := report.Frame{PC: f.PC, SP: f.SP, Kind: "user", Method: f.Method.String(), SignalFrame: f.SignalFrame}
		if m, ok := w.at.Find(f.PC); ok && m.Kind != procmaps.KindVDSO && m.Path != "" {
			base.Module, base.ModuleOffset, base.HasModule = m.Path, f.PC-m.Start+m.Offset, true
			base.MapStart, base.MapLimit, base.MapOffset = m.Start, m.End, m.Offset
		}
		return append(out, base)
	}
	for _, n := range names {
		n.PC, n.SP, n.Method, n.SignalFrame = f.PC, f.SP, f.Method.String(), f.SignalFrame
		out = append(out, n)
	}
	return out
}

// walking is the child's state for record: a resolver that compiles each
// module's CFI whole (resolve.Options.Sampler: many samples of the same
// code), the target's space, kept across ticks, and the addresses named
// for the parent since its maps changed.
type walking struct {
	res    *resolve.Resolver
	space  *resolve.Space
	p      *ptrace.Process
	named  map[uint64]bool
	frames []unwind.Frame
	// rt is the interpreter kept for process rtKey (recordruntime.go).
	rt    *pyruntime.Runtime
	rtKey procmaps.Identity
}

// walkTick answers a kRecord request: each thread's walk, packed, and the
// names of the addresses met for the first time.
func (st *walking) walkTick(newResolver func() *resolve.Resolver, mem io.ReaderAt, m *downMsg) (up upMsg, ok bool) {
	if st.res == nil {
		st.res = newResolver()
	}
	switch {
	case m.Proc != nil && st.space == nil:
		st.p, st.space = m.Proc, st.res.Space(m.Proc, mem)
		st.named = map[uint64]bool{}
	case m.Proc != nil:
		st.p = m.Proc
		st.space.Update(m.Proc) // new maps: the modules are found again
		st.named = map[uint64]bool{}
	case st.space == nil:
		return up, false
	default:
		st.space.Update(st.p) // the same maps: code pages read again
	}
	up.Kind = kRecord
	for i := range m.Threads {
		th := &m.Threads[i]
		var fr []unwind.Frame
		var stop unwind.StopReason
		ok := false
		if err := contain.Call("unwinding a thread", func() { fr, stop, ok = st.space.Unwind(th, st.frames[:0]) }); err != nil {
			fr, stop, ok = nil, unwind.StopFault, true
		}
		st.frames = fr
		if !ok {
			up.Walks = append(up.Walks, noRegs, 0)
			if sc := th.Syscall; sc != nil && sc.PC != 0 && !sc.Running {
				// (resolve.Resolver.Frames names the PC it blocks at.)
				st.name(&up, unwind.Frame{PC: sc.PC, Exact: true})
			}
			continue
		}
		up.Walks = append(up.Walks, uint64(len(fr)), uint64(stop))
		for _, f := range fr {
			fl := uint64(f.Method)
			if f.Exact {
				fl |= packExact
			}
			if f.SignalFrame {
				fl |= packSignal
			}
			up.Walks = append(up.Walks, f.PC, f.SP, fl)
			st.name(&up, f)
		}
	}
	return up, true
}

// name names f's address into up, the first time it is met.
func (st *walking) name(up *upMsg, f unwind.Frame) {
	key := nameKey(f)
	if st.named[key] {
		return
	}
	st.named[key] = true
	var fr []report.Frame
	if err := contain.Call("naming an address", func() { fr = st.res.Symbolize(st.space, f.PC, f.Exact || f.SignalFrame) }); err != nil {
		fr = nil
	}
	up.NamedPCs = append(up.NamedPCs, key)
	up.Frames = append(up.Frames, fr)
}

// samplingResolver is the child's resolver for record: the setup's
// options, with each module's CFI compiled whole (resolve.Options.Sampler),
// sharing the child's symbolizer.
func samplingResolver(cfg *setup, sym *symtab.Symbolizer) *resolve.Resolver {
	return resolve.NewResolver(sym, resolve.Options{MaxFrames: cfg.MaxFrames, Kernel: cfg.Kernel,
		Live: cfg.Live, KernelAddrs: cfg.KernelAddrs, Sampler: true, NoJava: cfg.NoJava})
}
