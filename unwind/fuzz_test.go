package unwind

import (
	"bytes"
	"testing"
)

// FuzzCFI feeds arbitrary bytes to the CIE/FDE parser and the compiler, as
// an .eh_frame and as a .debug_frame, then to LoadTable and LoadTableLazy
// as an ELF image, and walks the resulting rows. Nothing may panic or run unbounded.
func FuzzCFI(f *testing.F) {
	f.Add(ehFrame(stdCIE, 0x2000, 0x10, []byte{DW_CFA_advance_loc | 1, DW_CFA_def_cfa_offset, 16, DW_CFA_offset | 6, 2}))
	f.Add(ehFrame(stdCIE, 0x2000, 0x40, []byte{DW_CFA_remember_state, DW_CFA_advance_loc | 4, DW_CFA_restore_state,
		DW_CFA_def_cfa_expression, 3, 0x77, 8, 0x06, DW_CFA_val_expression, 3, 1, 0x31}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0, 0, 0, 0})
	if img := selfVDSO(); img != nil {
		f.Add(img) // a whole ELF image for LoadTable
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, eh := range []bool{true, false} {
			b := newBuilder()
			s := &frameSection{name: "fuzz", data: data, isEH: eh, bases: ptrBases{section: 0x1000}}
			_ = b.parseSection(s, 0)
			_ = b.compile()
			checkTable(t, b.t)
		}
		if tab, err := LoadTable(bytes.NewReader(data), nil); err == nil {
			checkTable(t, tab)
		}
		// The lazy table: every FDE its (hostile) search table lists,
		// at its start and just after.
		if tab, err := LoadTableLazy(nil, bytes.NewReader(data), nil); err == nil && tab.Lazy() {
			for i := 0; i < tab.lazy.count && i < 256; i++ {
				loc, _ := tab.lazy.entry(i)
				if r, ok := tab.Find(loc); ok {
					_ = r.String()
				}
				tab.Find(loc + 1)
			}
		}
	})
}

// checkTable asserts the table's invariants.
func checkTable(t *testing.T, tab *Table) {
	for i := 1; i < len(tab.addrs); i++ {
		if tab.addrs[i] <= tab.addrs[i-1] {
			t.Fatalf("rows not strictly increasing at %d", i)
		}
		if tab.sets[i] == tab.sets[i-1] {
			t.Fatalf("row %d equals its predecessor", i)
		}
	}
	n := 0
	tab.Rows(func(r Row) bool {
		if got, ok := tab.Find(r.Addr); !ok || got.Addr != r.Addr {
			t.Fatalf("Find(%#x) = %v %v", r.Addr, got, ok)
		}
		_ = r.String()
		n++
		return n < 1000
	})
}

// FuzzExpr evaluates arbitrary DWARF expressions against a small stack.
func FuzzExpr(f *testing.F) {
	f.Add([]byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}, uint64(0))
	f.Add([]byte{0x77, 0xa0, 0x01, 0x06}, uint64(0x1000))
	f.Add([]byte{0x2f, 0xfd, 0xff}, uint64(1))
	f.Add([]byte{0x31, 0x28, 0xfc, 0xff}, uint64(7))
	f.Add([]byte{0x11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, 0x11, 0x7f, 0x1b}, uint64(0))
	f.Fuzz(func(t *testing.T, code []byte, initial uint64) {
		w := testEnv()
		_, _ = evalExpr(code, w, initial&1 == 1, initial, true, initial)
	})
}

// FuzzUnwind walks hostile stacks (and a hostile CFA program) over a
// synthetic module whose code bytes are the stack bytes too: the walk must
// end, within MaxFrames, without panicking.
func FuzzUnwind(f *testing.F) {
	f.Add([]byte{DW_CFA_advance_loc | 1, DW_CFA_def_cfa_offset, 16}, []byte{0x10, 0x20, 0, 0, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0}, uint16(0x10), uint8(0))
	f.Add([]byte{DW_CFA_def_cfa, 6, 16, DW_CFA_offset | 6, 2}, []byte{0x20, 0x00, 0x01, 0, 0, 0, 0, 0, 0x15, 0x20, 0, 0, 0, 0, 0, 0}, uint16(0x80), uint8(1))
	f.Add([]byte{DW_CFA_undefined, 16}, []byte{}, uint16(0), uint8(2))
	f.Fuzz(func(t *testing.T, prog, stack []byte, pc uint16, mode uint8) {
		tab, _ := compileEH(t, ehFrame(stdCIE, 0x2000, 0x100, prog))
		if mode&4 != 0 {
			tab = nil // no CFI: frame pointers and scanning only
		}
		s := &synthSpace{tab: tab, code: stack, stackLo: synthStack - 0x1000, stackHi: synthStack + 0x1000}
		var r Regs
		r.Set(RegRIP, 0x2000+uint64(pc)%0x1000)
		r.Set(RegRSP, synthStack)
		if mode&1 != 0 {
			r.Set(RegRBP, synthStack+uint64(mode)*8)
		}
		in := &Input{Regs: r, Stack: Stack{Addr: synthStack, Data: stack}, Space: s, MaxFrames: 64}
		if mode&2 != 0 {
			in.StackLo, in.StackHi = s.stackLo, s.stackHi
		}
		frames, stop := Unwind(in, nil)
		if len(frames) == 0 || len(frames) > 64 || stop == StopNone {
			t.Fatalf("%d frames, stop %v", len(frames), stop)
		}
	})
}
