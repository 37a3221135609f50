package unwind

import (
	"encoding/binary"
	"stackshot/internal/bin"
	"testing"
)

// goFunc is one function of a synthetic Go module.
type goFunc struct {
	entry, end     uint64
	size           uint64
	root, switches bool
}

type goTab []goFunc

func (g goTab) FrameSize(vaddr uint64) (entry, size uint64, root, switches, ok bool) {
	for _, f := range g {
		if vaddr >= f.entry && vaddr < f.end {
			return f.entry, f.size, f.root, f.switches, true
		}
	}
	return 0, 0, false, false, false
}

// goSpace is a Go module at [0x2000, 0x3000) without CFI, its code, the
// thread's stack (the g0 stack) and a goroutine stack readable through
// Mem.
type goSpace struct {
	tab      goTab
	code     []byte
	g0, g0Hi uint64
	gs, gsHi uint64
	mem      map[uint64]uint64
}

func (s *goSpace) Lookup(addr uint64) (ModuleInfo, bool) {
	switch {
	case addr >= 0x2000 && addr < 0x3000:
		return ModuleInfo{Start: 0x2000, End: 0x3000, Exec: true, Go: s.tab}, true
	case addr >= s.g0 && addr < s.g0Hi:
		return ModuleInfo{Start: s.g0, End: s.g0Hi}, true
	case addr >= s.gs && addr < s.gsHi:
		return ModuleInfo{Start: s.gs, End: s.gsHi}, true
	}
	return ModuleInfo{}, false
}

func (s *goSpace) ReadCode(p []byte, addr uint64) (int, error) {
	if addr < 0x2000 || addr-0x2000 >= uint64(len(s.code)) {
		return 0, bin.ErrShort
	}
	return copy(p, s.code[addr-0x2000:]), nil
}

func (s *goSpace) ReadMemory(p []byte, addr uint64) (int, error) {
	n := uint64(len(p))
	inStack := addr >= s.g0 && addr+n <= s.g0Hi || addr >= s.gs && addr+n <= s.gsHi
	if !inStack || n%8 != 0 {
		return 0, bin.ErrShort
	}
	for i := uint64(0); i < n; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], s.mem[addr+i]) // zero where nothing was put
	}
	return len(p), nil
}

// call writes a direct call to target ending at ret.
func (s *goSpace) call(ret, target uint64) {
	b := s.code[ret-5-0x2000:]
	b[0] = 0xe8
	binary.LittleEndian.PutUint32(b[1:], uint32(int32(int64(target)-int64(ret))))
}

func (s *goSpace) walk(t *testing.T, regs Regs) ([]Frame, StopReason) {
	t.Helper()
	in := &Input{Regs: regs, StackLo: s.g0, StackHi: s.g0Hi, Space: s, Mem: s, MaxFrames: 16}
	return Unwind(in, nil)
}

var (
	fnA       = goFunc{entry: 0x2000, end: 0x2100, size: 16}
	fnB       = goFunc{entry: 0x2100, end: 0x2200, size: 32}
	fnGoexit  = goFunc{entry: 0x2200, end: 0x2210, root: true}
	fnSwitch  = goFunc{entry: 0x2300, end: 0x2400, size: 8, switches: true}
	fnCaller  = goFunc{entry: 0x2400, end: 0x2500, size: 40}
	goTestTab = goTab{fnA, fnB, fnGoexit, fnSwitch, fnCaller}
)

func newGoSpace() *goSpace {
	return &goSpace{tab: goTestTab, code: make([]byte, 0x1000), g0: 0x10000, g0Hi: 0x11000, gs: 0x20000, gsHi: 0x21000, mem: map[uint64]uint64{}}
}

func wantGoFrames(t *testing.T, fr []Frame, stop StopReason, wantStop StopReason, pcs ...uint64) {
	t.Helper()
	if stop != wantStop || len(fr) != len(pcs) {
		t.Fatalf("walk: %d frames %+v, stop %v; want pcs %#x, stop %v", len(fr), fr, stop, pcs, wantStop)
	}
	for i, f := range fr {
		if f.PC != pcs[i] {
			t.Errorf("frame %d: pc %#x, want %#x", i, f.PC, pcs[i])
		}
		if i > 0 && f.Method != MethodPclntab && f.Method != MethodFP {
			t.Errorf("frame %d: method %v", i, f.Method)
		}
	}
}

// TestGoWalkFrameSizes: each Go frame's caller is at SP+size, and the
// walk ends at a root function (runtime.goexit) however its slot reads.
func TestGoWalkFrameSizes(t *testing.T) {
	s := newGoSpace()
	sp := uint64(0x10100)
	s.mem[sp+16] = 0x2150          // A (size 16) returns into B
	s.mem[sp+24+32] = 0x2201       // B (size 32) returns into goexit
	s.mem[sp+24+32+8] = 0x2150     // whatever lies above goexit is not followed
	s.mem[sp+24+32+8+8] = 0x123456 // (nor this)
	fr, stop := s.walk(t, regsPCSP(0x2010, sp))
	wantGoFrames(t, fr, stop, StopEnd, 0x2010, 0x2150, 0x2201)
	if fr[1].SP != sp+24 || fr[2].SP != sp+24+40 {
		t.Errorf("sps %#x %#x", fr[1].SP, fr[2].SP)
	}
}

// TestGoWalkStackSwitch: a function running on g0 that a stack switch
// (systemstack) called continues at the switch's caller on the goroutine
// stack, at the exact slot its frame record and frame size agree on; a
// stale return address of the switching function itself is no caller.
func TestGoWalkStackSwitch(t *testing.T) {
	s := newGoSpace()
	sp := uint64(0x10100)
	s.mem[sp+16] = 0x2350  // A returns into the switching function
	rbp := uint64(0x20800) // the caller's frame record on the goroutine stack
	a := rbp - fnCaller.size
	s.mem[a] = 0x2420 // the caller's return address, after a call of the switch
	s.call(0x2420, fnSwitch.entry)
	// Stale, nearer RBP: a return address into the switching function
	// whose slot and frame size agree with RBP too.
	s.mem[rbp-fnSwitch.size] = 0x2330
	s.call(0x2330, fnSwitch.entry)
	s.mem[rbp+8] = 0x2150 // the caller returns into B
	s.call(0x2150, fnCaller.entry)
	s.mem[rbp+16+fnB.size] = 0x2201 // B returns into goexit
	regs := regsPCSP(0x2010, sp)
	regs.Set(RegRBP, rbp)
	fr, stop := s.walk(t, regs)
	wantGoFrames(t, fr, stop, StopEnd, 0x2010, 0x2350, 0x2420, 0x2150, 0x2201)
	if len(fr) == 4 && (fr[2].SP != a+8 || fr[2].Method != MethodPclntab) {
		t.Errorf("switch's caller: sp %#x (want %#x), method %v", fr[2].SP, a+8, fr[2].Method)
	}

	// A caller slot whose call targets another function is not taken:
	// the frame record alone leads on, past the caller.
	s.call(0x2420, fnA.entry)
	fr, stop = s.walk(t, regs)
	wantGoFrames(t, fr, stop, StopEnd, 0x2010, 0x2350, 0x2150, 0x2201)

	// mcall clears RBP: nothing lies beyond the switch.
	regs.Set(RegRBP, 0)
	fr, stop = s.walk(t, regs)
	wantGoFrames(t, fr, stop, StopEnd, 0x2010, 0x2350)
}

// TestGoWalkThroughSigtramp: Go's signal handler entry (runtime.sigtramp)
// is a root in the pclntab, but when it returns to the sigreturn
// trampoline the walk goes on through the signal frame to the code the
// signal interrupted, and ends at that stack's own root.
func TestGoWalkThroughSigtramp(t *testing.T) {
	s := newGoSpace()
	sigtramp := goFunc{entry: 0x2500, end: 0x2580, size: 0x18, root: true}
	s.tab = append(goTab{sigtramp}, goTestTab...)
	const tramp = 0x2600 // the restorer: mov $15,%rax; syscall
	copy(s.code[tramp-0x2000:], SigreturnTrampoline[:])
	sp := uint64(0x10100)
	s.mem[sp+0x18] = tramp // sigtramp returns to the restorer
	// The rt_sigframe: the restorer's SP (sp+0x20) + 40 is uc_mcontext.
	ctx := sp + 0x20 + SigcontextOffset
	interruptedSP := uint64(0x10800)
	s.mem[ctx+15*8] = interruptedSP  // rsp
	s.mem[ctx+16*8] = 0x2010         // rip: in A
	s.mem[interruptedSP+16] = 0x2201 // A (size 16) returns into goexit
	fr, stop := s.walk(t, regsPCSP(0x2510, sp))
	if stop != StopEnd || len(fr) != 4 || fr[0].PC != 0x2510 || fr[1].PC != tramp || fr[2].PC != 0x2010 || fr[3].PC != 0x2201 {
		t.Fatalf("walk: %+v, stop %v; want sigtramp, the restorer, A, goexit", fr, stop)
	}
	if !fr[1].SignalFrame {
		t.Errorf("the restorer's frame is not a signal frame: %+v", fr[1])
	}

	// A real root whose slot holds anything else still ends the walk.
	s.mem[sp+0x18] = 0x2150
	fr, stop = s.walk(t, regsPCSP(0x2510, sp))
	wantGoFrames(t, fr, stop, StopEnd, 0x2510)
}
