package resolve

import (
	"unsafe"

	"stackshot/internal/contain"
	"stackshot/ptrace"
	"stackshot/unwind"
)

// maxCheckedFrames bounds the frames the no-stop check keeps for the
// resolution that follows (24 bytes each: 1.5 MiB). Threads past it are
// unwound again, as before.
const maxCheckedFrames = 64 << 10

// checkedWalks keeps the walks of the no-stop check (CheckNoStop) of one
// capture, so that resolving the same capture does not unwind each thread
// a second time (a 1,000-frame stack cost the same walk twice). A walk is
// reused only for the very capture, thread and stack copy it was made
// from: the same Process, maps, thread id, capture method and stack buffer
// (the entries keep them alive, so their addresses cannot be reused).
type checkedWalks struct {
	p      *ptrace.Process
	maps   *byte // p.Maps' first entry when the walks were made
	nmaps  int
	walks  map[int]checkedWalk // by thread id
	frames []unwind.Frame      // every walk's frames, one after another
	// warmed are the frames WarmChecked looked at, and the mappings
	// (by start) whose modules it readied.
	warmed     int
	warmedMods map[uint64]bool
}

type checkedWalk struct {
	stack    []byte // the copy the walk read (kept for its identity)
	addr     uint64 // its address in the target
	lo, hi   uint64 // the stack mapping's bounds
	method   string
	pc, sp   uint64 // the registers the walk started from
	from, to int    // frames[from:to]
	stop     unwind.StopReason
}

func mapsID(p *ptrace.Process) (*byte, int) {
	if len(p.Maps) == 0 {
		return nil, 0
	}
	return (*byte)(unsafe.Pointer(&p.Maps[0])), len(p.Maps)
}

func walkStart(th *ptrace.Thread) (pc, sp uint64) {
	if len(th.Regs) >= unwind.UserRegsCount {
		r := unwind.RegsFromUser(th.Regs)
		pc, _ = r.Get(unwind.RegRIP)
		sp, _ = r.Get(unwind.RegRSP)
		return pc, sp
	}
	if th.Syscall != nil {
		return th.Syscall.PC, th.Syscall.SP
	}
	return 0, 0
}

// keep records the walk fr of thread th of s's capture; a walk of another
// capture drops what was kept before.
func (c *checkedWalks) keep(s *Space, th *ptrace.Thread, fr []unwind.Frame, stop unwind.StopReason) {
	maps, n := mapsID(s.p)
	if c.p != s.p || c.maps != maps || c.nmaps != n {
		c.p, c.maps, c.nmaps = s.p, maps, n
		clear(c.walks)
		c.frames = c.frames[:0]
		c.warmed = 0
		clear(c.warmedMods)
	}
	if len(th.Stack) == 0 || len(c.frames)+len(fr) > maxCheckedFrames {
		return
	}
	if c.walks == nil {
		c.walks = map[int]checkedWalk{}
	}
	pc, sp := walkStart(th)
	from := len(c.frames)
	if from == 0 && len(fr) > 0 && unsafe.SliceData(fr) == unsafe.SliceData(s.r.frames) {
		// The capture's first walk is in the resolver's scratch buffer:
		// kept by trading buffers, not copied (a 1,000-frame walk is
		// 24 KB of fresh memory to fault in).
		c.frames, s.r.frames = fr, c.frames[:0]
	} else {
		c.frames = append(c.frames, fr...)
	}
	c.walks[th.TID] = checkedWalk{stack: th.Stack, addr: th.StackAddr, lo: th.StackLo, hi: th.StackHi, method: th.Method,
		pc: pc, sp: sp, from: from, to: len(c.frames), stop: stop}
}

// take appends the kept walk of thread th of s's capture to out, if there
// is one, and forgets it.
func (c *checkedWalks) take(s *Space, th *ptrace.Thread, out []unwind.Frame) ([]unwind.Frame, unwind.StopReason, bool) {
	if c.p == nil || c.p != s.p || len(th.Stack) == 0 {
		return out, unwind.StopNone, false
	}
	if maps, n := mapsID(s.p); c.maps != maps || c.nmaps != n {
		return out, unwind.StopNone, false
	}
	w, ok := c.walks[th.TID]
	if !ok || unsafe.SliceData(w.stack) != unsafe.SliceData(th.Stack) || len(w.stack) != len(th.Stack) ||
		w.addr != th.StackAddr || w.lo != th.StackLo || w.hi != th.StackHi || w.method != th.Method {
		return out, unwind.StopNone, false
	}
	if pc, sp := walkStart(th); pc != w.pc || sp != w.sp {
		return out, unwind.StopNone, false
	}
	// Taken once: when every walk is, the capture is let go (a sampler
	// resolves each tick's capture right after its check).
	delete(c.walks, th.TID)
	if len(out) == 0 && w.from == 0 && len(c.walks) == 0 && unsafe.SliceData(out) == unsafe.SliceData(s.r.frames) {
		// The last walk, at the start of the buffer, asked for into the
		// resolver's scratch buffer: the buffers trade places (keep).
		fr := c.frames[:w.to]
		c.frames = out
		c.reset()
		return fr, w.stop, true
	}
	out = append(out, c.frames[w.from:w.to]...)
	if len(c.walks) == 0 {
		c.reset()
	}
	return out, w.stop, true
}

// reset drops every kept walk (keeping the frames' memory).
func (c *checkedWalks) reset() {
	c.p, c.maps, c.nmaps = nil, nil, 0
	clear(c.walks)
	c.frames = c.frames[:0]
	c.warmed = 0
	clear(c.warmedMods)
}

// WarmChecked readies, ahead of the resolve that names them, the modules
// the walks kept from s's no-stop checks are in: each module's first
// frame is looked up once, which loads its symbol table (and with lines,
// that frame's unit), from the cache or its files. A sandboxed child does
// it between its parent's requests, while the parent still captures.
// Frames looked at by an earlier call are not looked at again.
func (r *Resolver) WarmChecked(s *Space) {
	c := &r.checked
	if s == nil || c.p != s.p {
		return
	}
	for _, f := range c.frames[min(c.warmed, len(c.frames)):] {
		lookup := f.PC
		if !f.Exact && !f.SignalFrame && lookup > 0 {
			lookup--
		}
		m, ok := s.maps.Find(lookup)
		if !ok || c.warmedMods[m.Start] {
			continue
		}
		if c.warmedMods == nil {
			c.warmedMods = map[uint64]bool{}
		}
		c.warmedMods[m.Start] = true
		contain.Call("readying a module", func() { // (a panic: the resolve meets it again, per thread)
			if e := s.module(m); e.mod != nil && e.ok && !e.mod.Mismatch() {
				r.syms = e.mod.Lookup(lookup-e.bias, r.syms[:0])
			}
		})
	}
	c.warmed = len(c.frames)
}
