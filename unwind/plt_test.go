package unwind

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// fileSpace maps one ELF file at its own virtual addresses (bias 0), as a
// saved capture of a non-PIE layout would.
type fileSpace struct {
	f   *elf.File
	tab *Table
}

func (s *fileSpace) Lookup(addr uint64) (ModuleInfo, bool) {
	for _, p := range s.f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Memsz {
			return ModuleInfo{Start: p.Vaddr, End: p.Vaddr + p.Memsz, Exec: p.Flags&elf.PF_X != 0, CFI: s.tab}, true
		}
	}
	return ModuleInfo{}, false
}

func (s *fileSpace) ReadCode(p []byte, addr uint64) (int, error) {
	for _, pr := range s.f.Progs {
		if pr.Type == elf.PT_LOAD && addr >= pr.Vaddr && addr < pr.Vaddr+pr.Filesz {
			return pr.ReadAt(p, int64(addr-pr.Vaddr))
		}
	}
	return 0, os.ErrNotExist
}

func openFileSpace(t testing.TB, path string) *fileSpace {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	f, err := elf.NewFile(fh)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := LoadTable(fh, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fileSpace{f: f, tab: tab}
}

func symbolValue(t testing.TB, f *elf.File, name string) uint64 {
	t.Helper()
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no symbol %s", name)
	return 0
}

// Frame 0 inside a lazy PLT entry: the linker's CFI for .plt computes the
// CFA with a DWARF expression on RIP (rsp+8, or rsp+16 once the entry has
// pushed its relocation index).
func TestPLTFrame0(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	s := openFileSpace(t, bin)
	plt := s.f.Section(".plt")
	if plt == nil || plt.Size < 32 {
		t.Fatal("no lazy .plt")
	}
	if row, ok := s.tab.Find(plt.Addr + 16 + 11); !ok || row.CFA.Kind != RuleCFAExpr {
		t.Fatalf("row at plt entry: %v %v, want an expression CFA", row, ok)
	}
	ra := symbolValue(t, s.f, "a_read") + 9
	const stackAt = 0x7fff0000
	for _, tc := range []struct {
		name  string
		pc    uint64
		words int // words pushed below the return address
	}{
		{"entry jmp", plt.Addr + 16, 0},
		{"entry push", plt.Addr + 16 + 6, 0},
		{"entry jmp plt0", plt.Addr + 16 + 11, 1},
		{"plt0 push", plt.Addr, 1},
		{"plt0 jmp", plt.Addr + 6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, 64)
			binary.LittleEndian.PutUint64(data[tc.words*8:], ra)
			var regs Regs
			regs.Set(RegRIP, tc.pc)
			regs.Set(RegRSP, stackAt)
			in := &Input{Regs: regs, Stack: Stack{Addr: stackAt, Data: data}, Space: s, MaxFrames: 2}
			frames, stop := Unwind(in, nil)
			if len(frames) != 2 || stop != StopMaxFrames {
				t.Fatalf("frames %+v stop %v", frames, stop)
			}
			want := Frame{PC: ra, SP: stackAt + uint64(tc.words+1)*8, Method: MethodCFI}
			if frames[1] != want {
				t.Errorf("frame 1 = %+v, want %+v", frames[1], want)
			}
		})
	}
}
