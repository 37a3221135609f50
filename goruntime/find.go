package goruntime

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"stackshot/internal/contain"
)

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// maxScan bounds the bytes of one data segment scanned for the runtime's
// variables in a binary without symbols.
const maxScan = 64 << 20

// findModuledata finds runtime.firstmoduledata in a binary without a
// symbol table: in the initialized data of the executable (read from
// memory, where a PIE's pointers are already relocated), the one word that
// points to a pclntab header and is followed by slices into that table
// (funcnametab, pctab; pclntable and ftab starting at the same address),
// then minpc <= maxpc and text.
func findModuledata(mem io.ReaderAt, ef *elf.File, bias uint64, l *Layout) (uint64, error) {
	need := l.MDText + 8
	var found []uint64
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W == 0 || p.Filesz < uint64(need) || p.Filesz > maxScan {
			continue
		}
		seg := make([]byte, p.Filesz&^7)
		base := p.Vaddr + bias
		if readFull(mem, seg, base) != nil {
			continue
		}
		for i := 0; i+need <= len(seg); i += 8 {
			w := func(off int) uint64 { return le64(seg[i+off:]) }
			hdr := w(l.MDPcHeader)
			if hdr == 0 || hdr&7 != 0 {
				continue
			}
			fn, pc, tab, ftab := w(l.MDFuncnametab), w(l.MDPctab), w(l.MDPclntable), w(l.MDFtab)
			if fn <= hdr || fn-hdr > 1<<32 || pc <= fn || tab != ftab || tab <= pc || tab-hdr > 1<<32 {
				continue
			}
			minpc, maxpc, text := w(l.MDMinPC), w(l.MDMaxPC), w(l.MDText)
			if text == 0 || text > minpc || minpc >= maxpc || w(l.MDFtab+8) < 2 {
				continue
			}
			var h [8]byte
			if readFull(mem, h[:], hdr) != nil {
				continue
			}
			if m := binary.LittleEndian.Uint32(h[:]); (m == pclnMagic118 || m == pclnMagic120) && h[7] == 8 {
				found = append(found, base+uint64(i))
			}
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no runtime.firstmoduledata found in the program's data (no symbols)")
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d candidates for runtime.firstmoduledata in the program's data (no symbols)", len(found))
}

// findAllgs finds runtime.allgs and runtime.allglen in a binary without a
// symbol table. allgs is a slice in .bss whose array runtime.allgptr (also
// in .bss) points to, and the first goroutine in it is the main goroutine,
// goroutine 1. (allglen, the length kept for lock-free readers, is not
// needed: the slice's own length serves, and every g read is validated.)
//
// Another slice may share allgs' array: the garbage collector's snapshot
// of it (work.stackRoots, allgs[:n:n] at the last cycle's start), which is
// never longer. All candidates are kept; each read takes the longest.
func (rt *Runtime) findAllgs(md uint64) (cands []uint64, err error) {
	l := rt.Layout
	raw := make([]byte, l.MDEnoptrbss+8)
	if err := readFull(rt.mem, raw, md); err != nil {
		return nil, err
	}
	bss, ebss := le64(raw[l.MDBss:]), le64(raw[l.MDEbss:])
	if bss >= ebss || ebss-bss > maxScan {
		return nil, fmt.Errorf("runtime.firstmoduledata has no plausible bss")
	}
	b := make([]byte, (ebss-bss)&^7)
	if err := readFull(rt.mem, b, bss); err != nil {
		return nil, fmt.Errorf("reading .bss: %w", err)
	}
	count := map[uint64]int{}
	for i := 0; i+8 <= len(b); i += 8 {
		if v := le64(b[i:]); v != 0 {
			count[v]++
		}
	}
	var found []uint64
	buf := make([]byte, l.GSize)
	for i := 0; i+24 <= len(b); i += 8 {
		a, n, c := le64(b[i:]), le64(b[i+8:]), le64(b[i+16:])
		if a == 0 || a&7 != 0 || n == 0 || n > c || c > maxGoroutines || count[a] < 2 {
			continue
		}
		g1, err := readWord(rt.mem, a)
		if err != nil || g1 == 0 || readFull(rt.mem, buf, g1) != nil {
			continue
		}
		lo, hi := le64(buf[l.GStackLo:]), le64(buf[l.GStackHi:])
		if le64(buf[l.GGoid:]) == 1 && lo < hi && hi-lo <= maxStack {
			found = append(found, bss+uint64(i))
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no runtime.allgs found in the program's data (no symbols)")
	}
	if len(found) > 4 {
		return nil, fmt.Errorf("%d candidates for runtime.allgs in the program's data (no symbols)", len(found))
	}
	return found, nil
}

// LoadBias returns the load bias of the executable exe given one of its
// mappings: it starts at start and maps the file from offset (as
// /proc/PID/maps shows).
func LoadBias(exe io.ReaderAt, start, offset uint64) (bias uint64, ok bool) {
	contain.Do("reading the executable", func() error {
		bias, ok = loadBias(exe, start, offset)
		return nil
	})
	return bias, ok
}

func loadBias(exe io.ReaderAt, start, offset uint64) (bias uint64, ok bool) {
	ef, err := openELF(exe)
	if err != nil {
		return 0, false
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && offset >= p.Off&^0xfff && offset < p.Off+p.Filesz {
			return start - (p.Vaddr - (p.Off - offset)), true
		}
	}
	return 0, false
}
