package symtab

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"sync"
)

// goTable resolves pcs of a Go binary through its pclntab, which Go keeps
// even in binaries linked with -s -w.
type goTable struct {
	mu  sync.Mutex // debug/gosym keeps caches
	tab *gosym.Table
	inl *goInline // inline trees (Go 1.20+), or nil
}

// maxPclntabScan bounds the bytes searched for a pclntab header when the
// section headers are gone.
const maxPclntabScan = 1 << 30

// loadGoTable finds the pclntab: the .gopclntab section, else by its
// header's magic in the read-only segments (section headers stripped).
func loadGoTable(f *openFile) (*goTable, error) {
	ef := f.ef
	var data []byte
	var addr uint64
	if s := ef.Section(".gopclntab"); s != nil && s.Type != elf.SHT_NOBITS {
		b, err := sectionData(s, f.size)
		if err != nil {
			return nil, err
		}
		data, addr = b, s.Addr
	} else if ef.Section(".text") == nil || len(ef.Sections) == 0 {
		data, addr = scanPclntab(f)
	}
	if err := checkPclntabHeader(data, ef.ByteOrder); err != nil {
		return nil, err
	}
	text, gofunc, ok := moduledataText(f, addr, int(data[7]))
	if !ok {
		text, gofunc, ok = moduledataTextRela(f, addr, int(data[7]))
	}
	if !ok {
		text, gofunc = textStart(ef), 0
	}
	var tab *gosym.Table
	err := safely("gopclntab", func() error {
		lt := gosym.NewLineTable(data, text)
		t, err := gosym.NewTable(nil, lt)
		if err != nil {
			return err
		}
		if len(t.Funcs) == 0 {
			return ErrNoSymbols
		}
		// A wrong text base would name every pc wrongly: the functions
		// must lie in executable segments.
		for _, fn := range []gosym.Func{t.Funcs[0], t.Funcs[len(t.Funcs)/2], t.Funcs[len(t.Funcs)-1]} {
			if !inExec(ef, fn.Entry) {
				return &FormatError{Section: ".gopclntab", Msg: fmt.Sprintf("function %s at %#x is outside the code", fn.Name, fn.Entry)}
			}
		}
		tab = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	g := &goTable{tab: tab}
	if gofunc != 0 && !inExec(ef, gofunc) {
		if inl := newGoInline(data, ef.ByteOrder, text, gofunc, f); inl != nil && inl.agrees(tab) {
			g.inl = inl
		}
	}
	return g, nil
}

// checkPclntabHeader bounds the counts in a pclntab header by the table's
// size before debug/gosym allocates by them.
func checkPclntabHeader(data []byte, order interface {
	Uint32([]byte) uint32
	Uint64([]byte) uint64
}) error {
	if len(data) < 16 {
		return ErrNoSymbols
	}
	ptr := int(data[7])
	if ptr != 4 && ptr != 8 || len(data) < 8+3*ptr {
		return &FormatError{Section: ".gopclntab", Msg: "bad header"}
	}
	word := func(b []byte) uint64 {
		if ptr == 8 {
			return order.Uint64(b)
		}
		return uint64(order.Uint32(b))
	}
	nfunc := word(data[8:])
	nfiles := word(data[8+ptr:])
	if order.Uint32(data) == 0xfffffffb {
		nfiles = 0 // Go 1.2-1.15: no file count in the header
	}
	n := uint64(len(data))
	if nfunc == 0 || nfunc > n/8 || nfiles > n/4 {
		return &FormatError{Section: ".gopclntab", Msg: fmt.Sprintf("counts (%d functions, %d files) exceed the table", nfunc, nfiles)}
	}
	return nil
}

func inExec(ef *elf.File, addr uint64) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr-p.Vaddr < p.Memsz {
			return true
		}
	}
	return false
}

// maxRelas bounds the dynamic relocations read.
const maxRelas = 1 << 22

// moduledataTextRela does what moduledataText does for a PIE, whose
// moduledata pointers are R_*_RELATIVE relocations: the relocation whose
// addend is the pclntab's address is at &moduledata.pcHeader, and the one
// at the text field's address holds runtime.text.
func moduledataTextRela(f *openFile, pcln uint64, ptrSize int) (text, gofunc uint64, ok bool) {
	if pcln == 0 || ptrSize != 8 || f.ef.Class != elf.ELFCLASS64 {
		return 0, 0, false
	}
	s := f.ef.Section(".rela.dyn")
	if s == nil || s.Type != elf.SHT_RELA || s.Size/24 > maxRelas {
		return 0, 0, false
	}
	b, err := sectionData(s, f.size)
	if err != nil {
		return 0, 0, false
	}
	order := f.ef.ByteOrder
	addends := make(map[uint64]uint64)
	var md []uint64
	for i := 0; i+24 <= len(b); i += 24 {
		off, add := order.Uint64(b[i:]), order.Uint64(b[i+16:])
		addends[off] = add
		if add == pcln {
			md = append(md, off)
		}
	}
	textOff := uint64(ptrSize) * (1 + 6*3 + 3)
	for _, at := range md {
		if text, ok := addends[at+textOff]; ok && inExec(f.ef, text) {
			return text, addends[at+textOff+goFuncFieldIndex*uint64(ptrSize)], true
		}
	}
	return 0, 0, false
}

// textStart is runtime.text: the start of .text, else of the first
// executable segment.
func textStart(ef *elf.File) uint64 {
	if s := ef.Section(".text"); s != nil {
		return s.Addr
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return p.Vaddr
		}
	}
	return 0
}

// pclntab header magics (Go 1.20+, 1.18, 1.16, 1.2), little-endian.
var pclntabMagics = [][]byte{
	{0xf1, 0xff, 0xff, 0xff, 0, 0},
	{0xf0, 0xff, 0xff, 0xff, 0, 0},
	{0xfa, 0xff, 0xff, 0xff, 0, 0},
	{0xfb, 0xff, 0xff, 0xff, 0, 0},
}

// scanPclntab searches the non-executable PT_LOAD segments for a pclntab
// header and returns the bytes from there to the segment's end, and their
// virtual address.
func scanPclntab(f *openFile) ([]byte, uint64) {
	for _, p := range f.ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X != 0 || p.Flags&elf.PF_W != 0 {
			continue
		}
		if p.Filesz == 0 || p.Filesz > maxPclntabScan || p.Off > uint64(f.size) || p.Filesz > uint64(f.size)-p.Off {
			continue
		}
		seg := make([]byte, p.Filesz)
		if _, err := f.r.ReadAt(seg, int64(p.Off)); err != nil {
			continue
		}
		if !goBuildInfoPresent(f) {
			return nil, 0
		}
		for _, magic := range pclntabMagics {
			for off := 0; off+8 <= len(seg); {
				i := bytes.Index(seg[off:], magic)
				if i < 0 {
					break
				}
				h := seg[off+i:]
				if (h[6] == 1 || h[6] == 2 || h[6] == 4) && (h[7] == 4 || h[7] == 8) {
					return h, p.Vaddr + uint64(off+i)
				}
				off += i + 1
			}
		}
	}
	return nil, 0
}

// moduledataText finds runtime.firstmoduledata, whose first word points to
// the pclntab at pcln, and returns its text field (runtime.text: the base
// of the function entries of Go 1.18+ tables). In a PIE the pointer is a
// relocation's addend instead.
func moduledataText(f *openFile, pcln uint64, ptrSize int) (text, gofunc uint64, ok bool) {
	if pcln == 0 || (ptrSize != 4 && ptrSize != 8) {
		return 0, 0, false
	}
	order := f.ef.ByteOrder
	// moduledata: pcHeader pointer, six slices, findfunctab, minpc, maxpc,
	// text.
	textOff := uint64(ptrSize) * (1 + 6*3 + 3)
	word := func(b []byte) uint64 {
		if ptrSize == 8 {
			return order.Uint64(b)
		}
		return uint64(order.Uint32(b))
	}
	valid := func(text, minpc, maxpc uint64) bool {
		if text == 0 || text > minpc || minpc > maxpc {
			return false
		}
		for _, p := range f.ef.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && text >= p.Vaddr && text < p.Vaddr+p.Memsz {
				return true
			}
		}
		return false
	}
	pat := make([]byte, ptrSize)
	if ptrSize == 8 {
		order.PutUint64(pat, pcln)
	} else {
		order.PutUint32(pat, uint32(pcln))
	}
	for _, p := range f.ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W == 0 || p.Filesz == 0 || p.Filesz > maxPclntabScan ||
			p.Off > uint64(f.size) || p.Filesz > uint64(f.size)-p.Off {
			continue
		}
		seg := make([]byte, p.Filesz)
		if _, err := f.r.ReadAt(seg, int64(p.Off)); err != nil {
			continue
		}
		for off := 0; off < len(seg); {
			i := bytes.Index(seg[off:], pat)
			if i < 0 {
				break
			}
			at := uint64(off + i)
			off += i + 1
			if at%uint64(ptrSize) != 0 || at+textOff+uint64(ptrSize) > uint64(len(seg)) {
				continue
			}
			text := word(seg[at+textOff:])
			minpc, maxpc := word(seg[at+textOff-2*uint64(ptrSize):]), word(seg[at+textOff-uint64(ptrSize):])
			if valid(text, minpc, maxpc) {
				gofunc := uint64(0)
				if g := at + textOff + goFuncFieldIndex*uint64(ptrSize); g+uint64(ptrSize) <= uint64(len(seg)) {
					gofunc = word(seg[g:])
				}
				return text, gofunc, true
			}
		}
	}
	return 0, 0, false
}

// goFuncFieldIndex is the position of moduledata.gofunc counted in words
// from moduledata.text (text, etext, noptrdata, enoptrdata, data, edata,
// bss, ebss, noptrbss, enoptrbss, covctrs, ecovctrs, end, gcdata, gcbss,
// types, etypes, rodata, gofunc: Go 1.20+).
const goFuncFieldIndex = 18

// lookupSyms appends the frames at pc: through the direct reader with its
// inline trees when the table has them (checked against debug/gosym at
// load), else one frame from debug/gosym.
func (g *goTable) lookupSyms(pc uint64, out []Sym) ([]Sym, bool) {
	if g.inl != nil {
		n := len(out)
		var found bool
		err := safely("go inline tree", func() error {
			out, found = g.inl.lookup(pc, out)
			return nil
		})
		if err == nil && found {
			return out, true
		}
		out = out[:n]
	}
	name, entry, file, line, ok := g.lookup(pc)
	if !ok {
		return out, false
	}
	return append(out, Sym{Function: name, Offset: pc - entry, File: file, Line: line}), true
}

// lookup returns the function, file and line at pc.
func (g *goTable) lookup(pc uint64) (name string, entry uint64, file string, line int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := safely("gopclntab lookup", func() error {
		fn := g.tab.PCToFunc(pc)
		if fn == nil || pc >= fn.End {
			return ErrNoSymbols
		}
		name, entry = fn.Name, fn.Entry
		file, line, _ = g.tab.PCToLine(pc)
		ok = true
		return nil
	})
	if err != nil {
		return "", 0, "", 0, false
	}
	return name, entry, file, line, ok
}

// goBuildInfoMagic starts the Go build info blob every Go binary carries.
var goBuildInfoMagic = []byte("\xff Go buildinf:")

// goBuildInfoPresent reports whether some segment holds Go's build info,
// so that a pclntab magic found by scanning is not a chance match in a
// non-Go binary.
func goBuildInfoPresent(f *openFile) bool {
	for _, p := range f.ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X != 0 {
			continue
		}
		if p.Filesz == 0 || p.Filesz > maxPclntabScan || p.Off > uint64(f.size) || p.Filesz > uint64(f.size)-p.Off {
			continue
		}
		seg := make([]byte, p.Filesz)
		if _, err := f.r.ReadAt(seg, int64(p.Off)); err != nil {
			continue
		}
		if bytes.Contains(seg, goBuildInfoMagic) {
			return true
		}
	}
	return false
}
