package unwind

import (
	"bytes"
	"testing"
)

// FuzzCFI feeds arbitrary bytes to the CIE/FDE parser and the compiler, as
// an .eh_frame and as a .debug_frame, then to LoadTable as an ELF image,
// and walks the resulting rows. Nothing may panic or run unbounded.
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
