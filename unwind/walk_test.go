package unwind

import (
	"encoding/binary"
	"stackshot/internal/bin"
	"testing"
)

// synthSpace is one executable module [0x2000, 0x3000) with a synthetic
// table, code bytes from code (at 0x2000), and a stack mapping.
type synthSpace struct {
	tab     *Table
	code    []byte
	stackLo uint64
	stackHi uint64
	lookups int
}

func (s *synthSpace) Lookup(addr uint64) (ModuleInfo, bool) {
	s.lookups++
	switch {
	case addr >= 0x2000 && addr < 0x3000:
		return ModuleInfo{Start: 0x2000, End: 0x3000, Exec: true, CFI: s.tab}, true
	case addr >= s.stackLo && addr < s.stackHi:
		return ModuleInfo{Start: s.stackLo, End: s.stackHi}, true
	}
	return ModuleInfo{}, false
}

func (s *synthSpace) ReadCode(p []byte, addr uint64) (int, error) {
	if addr < 0x2000 || addr-0x2000 >= uint64(len(s.code)) {
		return 0, bin.ErrShort
	}
	return copy(p, s.code[addr-0x2000:]), nil
}

const synthStack = 0x10000

// synthWalk unwinds from pc with the given registers over a stack of words
// at synthStack.
func synthWalk(t *testing.T, prog []byte, regs Regs, words ...uint64) ([]Frame, StopReason) {
	t.Helper()
	tab, err := compileEH(t, ehFrame(stdCIE, 0x2000, 0x100, prog))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(data[i*8:], w)
	}
	s := &synthSpace{tab: tab, stackLo: synthStack - 0x1000, stackHi: synthStack + 0x1000}
	in := &Input{Regs: regs, Stack: Stack{Addr: synthStack, Data: data}, StackLo: s.stackLo, StackHi: s.stackHi, Space: s, MaxFrames: 8}
	return Unwind(in, nil)
}

func regsPCSP(pc, sp uint64) Regs {
	var r Regs
	r.Set(RegRIP, pc)
	r.Set(RegRSP, sp)
	return r
}

func TestStopReasons(t *testing.T) {
	// One FDE [0x2000,0x2100): CFA rsp+8, ra at c-8; from 0x2080 CFA r12+16.
	prog := []byte{DW_CFA_advance_loc1, 0x80, DW_CFA_def_cfa, 12, 16}
	t.Run("pc zero", func(t *testing.T) {
		frames, stop := synthWalk(t, prog, regsPCSP(0x2010, synthStack), 0)
		if stop != StopPCZero || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("stack copy", func(t *testing.T) {
		frames, stop := synthWalk(t, prog, regsPCSP(0x2010, synthStack+64))
		if stop != StopStackCopy || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("not exec", func(t *testing.T) {
		frames, stop := synthWalk(t, prog, regsPCSP(0x2010, synthStack), 0x9999)
		if stop != StopNotExec || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("unknown register", func(t *testing.T) {
		// CFA r12+16 but r12 is unknown: never guessed.
		frames, stop := synthWalk(t, prog, regsPCSP(0x2090, synthStack), 0x2010, 0x2010)
		if stop != StopUnknownReg || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("no progress", func(t *testing.T) {
		// r12 known, CFA = r12+16 below SP.
		r := regsPCSP(0x2090, synthStack+16)
		r.Set(RegR12, synthStack-16)
		frames, stop := synthWalk(t, prog, r, 0x2010, 0x2010, 0x2010)
		if stop != StopNoProgress || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("left stack", func(t *testing.T) {
		r := regsPCSP(0x2090, synthStack)
		r.Set(RegR12, synthStack+0x2000)
		frames, stop := synthWalk(t, prog, r, 0x2010)
		if stop != StopLeftStack || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("max frames", func(t *testing.T) {
		words := make([]uint64, 16)
		for i := range words {
			words[i] = 0x2010
		}
		frames, stop := synthWalk(t, prog, regsPCSP(0x2010, synthStack), words...)
		if stop != StopMaxFrames || len(frames) != 8 {
			t.Errorf("%d frames, %v", len(frames), stop)
		}
		for i, f := range frames[1:] {
			if f.PC != 0x2010 || f.SP != synthStack+8*uint64(i+1) || f.Method != MethodCFI || f.Exact {
				t.Errorf("frame %d: %+v", i+1, f)
			}
		}
	})
	t.Run("end", func(t *testing.T) {
		end := []byte{DW_CFA_undefined, 16}
		frames, stop := synthWalk(t, end, regsPCSP(0x2010, synthStack), 0x2010)
		if stop != StopEnd || len(frames) != 1 {
			t.Errorf("%v %v", frames, stop)
		}
	})
	t.Run("no rip", func(t *testing.T) {
		var r Regs
		r.Set(RegRSP, synthStack)
		frames, stop := synthWalk(t, prog, r)
		if stop != StopUnknownReg || len(frames) != 0 {
			t.Errorf("%v %v", frames, stop)
		}
	})
}

// Caller-saved registers are unknown in callers; callee-saved ones
// survive unless the CFI restores them.
func TestKnownRegisterTracking(t *testing.T) {
	// At 0x2000: CFA rsp+16, rbx at c-16; from 0x2080 CFA = rbx+8 (only
	// meaningful if rbx was restored) and from 0x20c0 CFA = rax+8.
	prog := []byte{DW_CFA_def_cfa_offset, 16, DW_CFA_offset | 3, 2,
		DW_CFA_advance_loc1, 0x80, DW_CFA_def_cfa, 3, 8,
		DW_CFA_advance_loc | 0x3f, DW_CFA_advance_loc | 1, DW_CFA_def_cfa, 0, 8}
	r := regsPCSP(0x2010, synthStack)
	r.Set(RegRAX, 1)
	// frame 0 at 0x2010 -> caller 0x2090 (rbx restored = synthStack+16,
	// CFA rbx+8 = synthStack+24) -> caller 0x20c8 (CFA rax+8: rax is
	// caller-saved, unknown in callers) -> stop.
	frames, stop := synthWalk(t, prog, r, synthStack+16, 0x2090, 0x20c9, 0x20c9)
	if stop != StopUnknownReg || len(frames) != 3 || frames[1].PC != 0x2090 || frames[2].PC != 0x20c9 || frames[2].SP != synthStack+24 {
		t.Errorf("frames %+v stop %v", frames, stop)
	}
}

// A call through a bad pointer: frame 0's PC is unmapped, the word at SP
// is the return address after `call *%rax`; the frame pointer (pointing at
// an older frame) must not be preferred.
func TestWildPC(t *testing.T) {
	code := make([]byte, 0x40)
	code[0x0e], code[0x0f] = 0xff, 0xd0 // 0x200e: call *%rax
	code[0x2b] = 0xe8                   // 0x202b: call rel32 (target irrelevant)
	data := make([]byte, 64)
	binary.LittleEndian.PutUint64(data[0:], 0x2010)
	binary.LittleEndian.PutUint64(data[32:], synthStack+48) // the frame record RBP points at
	binary.LittleEndian.PutUint64(data[40:], 0x2030)
	s := &synthSpace{code: code, stackLo: synthStack - 0x1000, stackHi: synthStack + 0x1000}
	r := regsPCSP(0x10, synthStack)
	r.Set(RegRBP, synthStack+32)
	in := &Input{Regs: r, Stack: Stack{Addr: synthStack, Data: data}, StackLo: s.stackLo, StackHi: s.stackHi, Space: s, MaxFrames: 2}
	frames, stop := Unwind(in, nil)
	if len(frames) != 2 || frames[1].PC != 0x2010 || frames[1].SP != synthStack+8 || stop != StopMaxFrames {
		t.Errorf("frames %+v stop %v", frames, stop)
	}
}

// TestGrowBounds checks the room a deep walk makes for its frames: the
// stack's estimate, never more than the frame limit allows, always at
// least one more frame, whatever (hostile) stack pointers it is given.
func TestGrowBounds(t *testing.T) {
	const first, max = 3, 1024
	mk := func(n int, sp0 uint64) []Frame {
		out := make([]Frame, first+n, first+n)
		out[first].SP = sp0
		return out
	}
	for _, c := range []struct {
		name        string
		hi, sp0, sp uint64
		n, atLeast  int
		atMost      int
	}{
		{"uniform recursion", 0x11000, 0x10000, 0x10000 + 16*32, 16, 0x1000 / 32, 16 * (0x1000/(16*32) + 1)},
		{"deep past the limit", 0x100000, 0x10000, 0x10000 + 16*16, 16, max, max},
		{"sp below the first", 0x20000, 0x10000, 0x8000, 16, 32, 32},
		{"sp above the top", 0x20000, 0x10000, 0x30000, 16, 32, 32},
		{"equal sp", 0x20000, 0x10000, 0x10000, 16, 32, 32},
		{"huge stack", ^uint64(0), 0x10000, 0x10001, 16, max, max},
		{"next to the limit", 0x20000, 0x10000, 0x10000 + 16, max - 1, max, max},
	} {
		w := &walker{in: &Input{}, hi: c.hi}
		got := w.grow(mk(c.n, c.sp0), first, max, c.sp)
		// (an allocation is rounded up to its size class: 1/8 more at most)
		if room := cap(got) - first; room < c.atLeast || room < c.n+1 || room > c.atMost*9/8+1 {
			t.Errorf("%s: room for %d frames, want %d..%d", c.name, room, c.atLeast, c.atMost)
		}
		if len(got) != first+c.n || got[first].SP != c.sp0 {
			t.Errorf("%s: frames not kept", c.name)
		}
	}
}
